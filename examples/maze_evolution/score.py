"""Scorer for one maze (written by tasks.maze.spec)."""

from tasks.maze.spec import score_file

STYLE = 'compact'
MAZE = {"rows": ["#.###GG", ".E....G", "L......", "..L#...", "L.#.#..", "DD#..LS", "D...LL."], "budget": 15}


def evaluate(path):
    return score_file(MAZE, STYLE, path)
