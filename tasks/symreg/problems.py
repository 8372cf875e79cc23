"""Benchmark problems: Nguyen-1..12 and Feynman equations from SRBench (AI Feynman).

Formulas are numpy expressions over x0..xk. Sampling ranges are the documented ones:
Nguyen as in Uy et al. (2011) / the DSR benchmark table (20 uniform points per problem),
Feynman as in the AI Feynman dataset that SRBench uses (each variable uniform in its range).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SymregProblem:
    name: str
    formula: str  # numpy expression over x0..x{k-1}
    ranges: tuple[tuple[float, float], ...]  # uniform sampling range of each variable
    points: int = 20  # documented number of training points
    variables: str = ""  # the physical variable names, in x0.. order (Feynman)

    @property
    def arity(self) -> int:
        return len(self.ranges)


def _nguyen(i: int, formula: str, low: float, high: float, arity: int = 1) -> SymregProblem:
    return SymregProblem(f"nguyen-{i}", formula, ((low, high),) * arity)


NGUYEN = (
    _nguyen(1, "x0**3 + x0**2 + x0", -1, 1),
    _nguyen(2, "x0**4 + x0**3 + x0**2 + x0", -1, 1),
    _nguyen(3, "x0**5 + x0**4 + x0**3 + x0**2 + x0", -1, 1),
    _nguyen(4, "x0**6 + x0**5 + x0**4 + x0**3 + x0**2 + x0", -1, 1),
    _nguyen(5, "sin(x0**2)*cos(x0) - 1", -1, 1),
    _nguyen(6, "sin(x0) + sin(x0 + x0**2)", -1, 1),
    _nguyen(7, "log(x0 + 1) + log(x0**2 + 1)", 0, 2),
    _nguyen(8, "sqrt(x0)", 0, 4),
    _nguyen(9, "sin(x0) + sin(x1**2)", 0, 1, 2),
    _nguyen(10, "2*sin(x0)*cos(x1)", 0, 1, 2),
    _nguyen(11, "x0**x1", 0, 1, 2),
    _nguyen(12, "x0**4 - x0**3 + x1**2/2 - x1", 0, 1, 2),
)


def _feynman(name: str, formula: str, variables: str, *ranges: tuple[float, float]) -> SymregProblem:
    return SymregProblem(f"feynman-{name}", formula, tuple(ranges), points=100, variables=variables)


_R15 = (1.0, 5.0)
FEYNMAN = (
    _feynman("I.6.2a", "exp(-x0**2/2)/sqrt(2*pi)", "theta", (1, 3)),
    _feynman("I.6.2", "exp(-(x1/x0)**2/2)/(sqrt(2*pi)*x0)", "sigma theta", (1, 3), (1, 3)),
    _feynman("I.8.14", "sqrt((x1 - x0)**2 + (x3 - x2)**2)", "x1 x2 y1 y2", _R15, _R15, _R15, _R15),
    _feynman("I.10.7", "x0/sqrt(1 - x1**2/x2**2)", "m_0 v c", (1, 5), (1, 2), (3, 10)),
    _feynman("I.12.1", "x0*x1", "mu Nn", _R15, _R15),
    _feynman("I.12.4", "x0/(4*pi*x1*x2**2)", "q1 epsilon r", _R15, _R15, _R15),
    _feynman("I.13.4", "x0*(x1**2 + x2**2 + x3**2)/2", "m v u w", _R15, _R15, _R15, _R15),
    _feynman("I.14.4", "x0*x1**2/2", "k_spring x", _R15, _R15),
    _feynman("I.15.10", "x0*x1/sqrt(1 - x1**2/x2**2)", "m_0 v c", (1, 5), (1, 2), (3, 10)),
    _feynman("I.18.4", "(x0*x2 + x1*x3)/(x0 + x1)", "m1 m2 r1 r2", _R15, _R15, _R15, _R15),
    _feynman("I.24.6", "x0*(x1**2 + x2**2)*x3**2/4", "m omega omega_0 x", (1, 3), (1, 3), (1, 3), (1, 3)),
    _feynman("I.29.4", "x0/x1", "omega c", (1, 10), (1, 10)),
    _feynman("I.39.1", "3*x0*x1/2", "pr V", _R15, _R15),
    _feynman("II.38.14", "x0/(2*(1 + x1))", "Y sigma", _R15, _R15),
)

PROBLEMS = {problem.name: problem for problem in NGUYEN + FEYNMAN}
