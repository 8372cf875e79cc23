"""Scorer for one maze (written by tasks.maze.spec)."""

from tasks.maze.spec import score_file

STYLE = 'compact'
MAZE = {"rows": ["D...#S#", "D....L#", "......#", ".L...L.", "....##.", ".E....#", ".#...GG"], "budget": 19}


def evaluate(path):
    return score_file(MAZE, STYLE, path)
