"""Hand-written GPT-2 LM with exactly Hugging Face's GPT2LMHeadModel module / parameter names.

Parameter paths (state_dict keys, identical to transformers' GPT2LMHeadModel):
  transformer.wte.weight [V,E]            transformer.wpe.weight [P,E]
  transformer.h.{i}.ln_1.{weight,bias}    transformer.h.{i}.attn.c_attn.{weight [E,3E], bias [3E]}
  transformer.h.{i}.attn.c_proj.{weight [E,E], bias}
  transformer.h.{i}.ln_2.{weight,bias}    transformer.h.{i}.mlp.c_fc.{weight [E,4E], bias}
  transformer.h.{i}.mlp.c_proj.{weight [4E,E], bias}
  transformer.ln_f.{weight,bias}          lm_head.weight (the same Parameter as transformer.wte.weight)
Buffers: transformer.h.{i}.attn.bias, bool [1,1,P,P] lower-triangular (non-persistent, like HF:
not in state_dict, but TorchScript serializes it as a module attribute).
Dropout modules (p=0.1): transformer.drop, h.{i}.attn.attn_dropout, h.{i}.attn.resid_dropout,
h.{i}.mlp.dropout.
"""

import math
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import InputSpec, ModelSpec, init_params_


class GPT2Config:
    def __init__(self, vocab_size: int = 128, n_positions: int = 32, n_embd: int = 32,
                 n_layer: int = 2, n_head: int = 2, dropout: float = 0.1,
                 layer_norm_epsilon: float = 1e-5):
        self.vocab_size = vocab_size
        self.n_positions = n_positions
        self.n_embd = n_embd
        self.n_layer = n_layer
        self.n_head = n_head
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon


class Conv1D(nn.Module):
    """HF's Conv1D: a linear layer whose weight is stored transposed, [in, out]."""

    def __init__(self, nf: int, nx: int):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # HF writes `x.size()[:-1] + (self.nf,)`; a List[int] is used so that TorchScript accepts it.
        size_out: List[int] = list(x.size()[:-1])
        size_out.append(self.nf)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        x = x.view(size_out)
        return x


def gelu_new(x: torch.Tensor) -> torch.Tensor:
    """HF's NewGELUActivation (tanh approximation), written with elementwise math."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Attention(nn.Module):
    def __init__(self, config: GPT2Config):
        super().__init__()
        max_positions = config.n_positions
        self.register_buffer(
            "bias",
            torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)).view(
                1, 1, max_positions, max_positions),
            persistent=False,
        )
        self.embed_dim = config.n_embd
        self.num_heads = config.n_head
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)

    def _split_heads(self, tensor: torch.Tensor, num_heads: int, attn_head_size: int) -> torch.Tensor:
        new_shape: List[int] = list(tensor.size()[:-1])
        new_shape.append(num_heads)
        new_shape.append(attn_head_size)
        tensor = tensor.view(new_shape)
        return tensor.permute(0, 2, 1, 3)  # (batch, head, seq_length, head_features)

    def _merge_heads(self, tensor: torch.Tensor, num_heads: int, attn_head_size: int) -> torch.Tensor:
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        new_shape: List[int] = list(tensor.size()[:-2])
        new_shape.append(num_heads * attn_head_size)
        return tensor.view(new_shape)

    def _attn(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        attn_weights = attn_weights / torch.full(
            [], value.size(-1) ** 0.5, dtype=attn_weights.dtype, device=attn_weights.device)
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length:key_length, :key_length]
        # float32's lowest (TorchScript lacks torch.finfo), even under bf16 autocast.
        mask_value = torch.full([], -3.4028234663852886e38, dtype=torch.float32,
                                device=attn_weights.device)
        attn_weights = torch.where(causal_mask, attn_weights, mask_value)
        attn_weights = F.softmax(attn_weights, dim=-1)
        attn_weights = self.attn_dropout(attn_weights)
        return torch.matmul(attn_weights, value)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query = self._split_heads(query, self.num_heads, self.head_dim)
        key = self._split_heads(key, self.num_heads, self.head_dim)
        value = self._split_heads(value, self.num_heads, self.head_dim)
        attn_output = self._attn(query, key, value)
        attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)
        attn_output = self.c_proj(attn_output)
        attn_output = self.resid_dropout(attn_output)
        return attn_output


class GPT2MLP(nn.Module):
    def __init__(self, intermediate_size: int, config: GPT2Config):
        super().__init__()
        self.c_fc = Conv1D(intermediate_size, config.n_embd)
        self.c_proj = Conv1D(config.n_embd, intermediate_size)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = self.c_fc(hidden_states)
        hidden_states = gelu_new(hidden_states)
        hidden_states = self.c_proj(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return hidden_states


class GPT2Block(nn.Module):
    def __init__(self, config: GPT2Config):
        super().__init__()
        hidden_size = config.n_embd
        self.ln_1 = nn.LayerNorm(hidden_size, eps=config.layer_norm_epsilon)
        self.attn = GPT2Attention(config)
        self.ln_2 = nn.LayerNorm(hidden_size, eps=config.layer_norm_epsilon)
        self.mlp = GPT2MLP(4 * hidden_size, config)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        residual = hidden_states
        hidden_states = self.ln_1(hidden_states)
        attn_output = self.attn(hidden_states)
        hidden_states = attn_output + residual
        residual = hidden_states
        hidden_states = self.ln_2(hidden_states)
        feed_forward_hidden_states = self.mlp(hidden_states)
        hidden_states = residual + feed_forward_hidden_states
        return hidden_states


class GPT2Model(nn.Module):
    def __init__(self, config: GPT2Config):
        super().__init__()
        self.embed_dim = config.n_embd
        self.wte = nn.Embedding(config.vocab_size, self.embed_dim)
        self.wpe = nn.Embedding(config.n_positions, self.embed_dim)
        self.drop = nn.Dropout(config.dropout)
        self.h = nn.ModuleList([GPT2Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(self.embed_dim, eps=config.layer_norm_epsilon)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        position_ids = torch.arange(0, input_shape[-1], dtype=torch.long,
                                    device=input_ids.device).unsqueeze(0)
        inputs_embeds = self.wte(input_ids)
        position_embeds = self.wpe(position_ids)
        hidden_states = inputs_embeds + position_embeds
        hidden_states = self.drop(hidden_states)
        for block in self.h:
            hidden_states = block(hidden_states)
        hidden_states = self.ln_f(hidden_states)
        output_shape: List[int] = list(input_shape)
        output_shape.append(hidden_states.size(-1))
        return hidden_states.view(output_shape)


class GPT2LMHeadModel(nn.Module):
    """forward(input_ids i64[B,S], labels i64[B,S]) -> scalar shifted LM cross-entropy."""

    def __init__(self, config: GPT2Config):
        super().__init__()
        self.vocab_size = config.vocab_size
        self.transformer = GPT2Model(config)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        init_params_(self)
        self.lm_head.weight = self.transformer.wte.weight  # tied: one Parameter, two paths

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        hidden_states = self.transformer(input_ids)
        lm_logits = self.lm_head(hidden_states)
        shift_logits = lm_logits[:, :-1, :].contiguous()
        shift_labels = labels[:, 1:].contiguous()
        loss = F.cross_entropy(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))
        return loss


def build() -> GPT2LMHeadModel:
    return GPT2LMHeadModel(GPT2Config())


def build_four_heads() -> GPT2LMHeadModel:
    """Four heads of 8: enough to split attention over four ranks."""
    return GPT2LMHeadModel(GPT2Config(n_head=4))


def build_four_layers() -> GPT2LMHeadModel:
    """Four blocks: one per stage of a four-stage pipeline."""
    return GPT2LMHeadModel(GPT2Config(n_layer=4))


INPUTS = [
    InputSpec("input_ids", torch.int64, [2, 16], kind="int", low=0, high=128),
    InputSpec("labels", torch.int64, [2, 16], kind="int", low=0, high=128),
]
SPECS = [
    ModelSpec("gpt2", build, INPUTS),
    ModelSpec("gpt2_4heads", build_four_heads, INPUTS),
    ModelSpec("gpt2_4layers", build_four_layers, INPUTS),
]
