# VPO inside TRL's GRPOTrainer with your own objectives (pip install 'vpo-evo[trl]').
import os

import numpy as np
import torch
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from training.integrations.vpo_reward import VPOReward


def vector_reward(prompt, answer):  # your objectives, one number each: here brevity and letter variety
    return np.array([1.0 / (1.0 + len(answer)), len(set(answer.lower())) / 26.0])


def split_answers(completion):  # your answer format: here one answer per line, at most three
    return [line.strip() for line in completion.splitlines() if line.strip()][:3]


prompts = Dataset.from_dict({"prompt": ["Name three animals, one per line:", "Name three colours, one per line:"]})
args = GRPOConfig(output_dir="vpo-trl", num_generations=4, per_device_train_batch_size=4, max_completion_length=32,
                  max_steps=2, bf16=torch.cuda.is_available(), report_to="none")

reward = VPOReward(vector_reward, split_answers, K=100)  # R(S): mean over 100 Dirichlet weightings of the best answer
trainer = GRPOTrainer(model=os.environ.get("MODEL", "Qwen/Qwen2.5-0.5B-Instruct"), reward_funcs=reward, args=args,
                      train_dataset=prompts)
trainer.train()
