"""Policies that train during each of `evo compare --spec`'s search runs (`--train NAME=ALGO`),
each run starting from the checkpoint's weights, as `evo run --train` trains its one policy."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from evo.errors import UserError


def trainers(algos: Mapping[str, str], uris: Mapping[str, str], every: int | None, options: dict,
             spec: Any, answers: Mapping[str, int] | None = None) -> dict[str, tuple[dict, Callable]]:
    """NAME -> (its settings as stored in compare.json, `train(config, loop)` for
    evo.compare.spec_search.run_one), every setting checked against the policy and the spec
    (OnlineSettings.check_policy, as `evo run --train` checks them; `answers`: the programs per
    reply `--answers NAME=M` asks of a policy)."""
    from training.online import OnlineSettings

    for name in algos:
        if name not in uris:
            raise UserError(f"--train {name}=...: no --policy named {name!r}")
    settings = {name: OnlineSettings.of(algo, every or 4, options) for name, algo in algos.items()}
    for name, one in settings.items():
        one.check_policy(uris[name], spec, (answers or {}).get(name, 0))
    return {name: (dataclasses.asdict(one), trained(one)) for name, one in settings.items()}


def trained(settings) -> Callable:
    """`train(config, loop)` for spec_search.run_one: the run's policy, loaded afresh (every run
    starts from the checkpoint's weights), and the learner that trains it during the run."""
    from evo import policies as registry
    from training.online import Learner

    def start(config, loop):
        policy = registry.load(config.policy)
        return policy, Learner.of(policy, config.directory, loop, next(iter(config.named)), config.spec().problem,
                                  settings)

    return start
