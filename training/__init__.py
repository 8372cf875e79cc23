"""RL post-training: advantage estimators (GRPO, VPO, baselines), rollouts, the PPO-clip trainer."""
