"""Policies that train during each of `evo compare --spec`'s search runs (`--train NAME=ALGO`),
each run starting from the checkpoint's weights, as `evo run --train` trains its one policy."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from evo.errors import UserError


def trainers(algos: Mapping[str, str], uris: Mapping[str, str], every: int | None, options: dict,
             group: int) -> dict[str, tuple[dict, Callable]]:
    """NAME -> (its settings as stored in compare.json, `train(config, policy)` for
    evo.compare.spec_search.run_one), every option checked (`group`: the spec's completions per prompt)."""
    from training.online import OnlineSettings

    for name in algos:
        if name not in uris:
            raise UserError(f"--train {name}=...: no --policy named {name!r}")
        if not uris[name].startswith(("local:", "vllm:")):
            raise UserError(f"--train {name}: only a local:PATH or vllm:PATH policy trains in this process, not {uris[name]!r}")
    settings = {name: OnlineSettings.of(algo, every or 4, options) for name, algo in algos.items()}
    for one in settings.values():
        one.check_group(group)
    return {name: (dataclasses.asdict(one), trained(one)) for name, one in settings.items()}


def trained(settings) -> Callable:
    """`train(config, policy)` for spec_search.run_one: the run's policy, loaded afresh, training itself."""
    from evo import policies as registry
    from training.online import online_policy

    def wrap(config, policy):
        return online_policy(registry.load(config.policy), config, settings)  # every run starts from the checkpoint's weights

    return wrap
