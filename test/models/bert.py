"""Hand-written BERT masked LM with exactly Hugging Face's BertForMaskedLM module / parameter names.

Parameter paths (state_dict keys, identical to transformers' BertForMaskedLM):
  bert.embeddings.{word_embeddings [V,H], position_embeddings [P,H], token_type_embeddings [2,H]}.weight
  bert.embeddings.LayerNorm.{weight,bias}
  bert.encoder.layer.{i}.attention.self.{query,key,value}.{weight,bias}
  bert.encoder.layer.{i}.attention.output.dense.{weight,bias}
  bert.encoder.layer.{i}.attention.output.LayerNorm.{weight,bias}
  bert.encoder.layer.{i}.intermediate.dense.{weight [I,H],bias}
  bert.encoder.layer.{i}.output.dense.{weight [H,I],bias}
  bert.encoder.layer.{i}.output.LayerNorm.{weight,bias}
  cls.predictions.bias [V]
  cls.predictions.transform.dense.{weight,bias}   cls.predictions.transform.LayerNorm.{weight,bias}
  cls.predictions.decoder.weight  (the same Parameter as bert.embeddings.word_embeddings.weight)
  cls.predictions.decoder.bias    (the same Parameter as cls.predictions.bias, as in HF)
Buffers (non-persistent, like HF): bert.embeddings.position_ids i64[1,P] (arange),
bert.embeddings.token_type_ids i64[1,P] (zeros).
"""

import math
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import InputSpec, ModelSpec, init_params_


class BertConfig:
    def __init__(self, vocab_size: int = 128, hidden_size: int = 32, num_hidden_layers: int = 2,
                 num_attention_heads: int = 2, intermediate_size: int = 64,
                 max_position_embeddings: int = 32, type_vocab_size: int = 2,
                 hidden_dropout_prob: float = 0.1, attention_probs_dropout_prob: float = 0.1,
                 layer_norm_eps: float = 1e-12):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.layer_norm_eps = layer_norm_eps


class BertEmbeddings(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.register_buffer("position_ids",
                             torch.arange(config.max_position_embeddings).expand((1, -1)),
                             persistent=False)
        self.register_buffer("token_type_ids",
                             torch.zeros(self.position_ids.size(), dtype=torch.long),
                             persistent=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        input_shape = input_ids.size()
        seq_length = input_shape[1]
        position_ids = self.position_ids[:, 0:seq_length]
        # token_type_ids are all zeros: the registered buffer, sliced and expanded (as HF does
        # when the caller passes no token_type_ids).
        buffered_token_type_ids = self.token_type_ids[:, :seq_length]
        token_type_ids = buffered_token_type_ids.expand(input_shape[0], seq_length)
        inputs_embeds = self.word_embeddings(input_ids)
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + token_type_embeddings
        position_embeddings = self.position_embeddings(position_ids)
        embeddings = embeddings + position_embeddings
        embeddings = self.LayerNorm(embeddings)
        embeddings = self.dropout(embeddings)
        return embeddings


class BertSelfAttention(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(config.hidden_size, self.all_head_size)
        self.key = nn.Linear(config.hidden_size, self.all_head_size)
        self.value = nn.Linear(config.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def transpose_for_scores(self, x: torch.Tensor) -> torch.Tensor:
        new_x_shape: List[int] = list(x.size()[:-1])
        new_x_shape.append(self.num_attention_heads)
        new_x_shape.append(self.attention_head_size)
        x = x.view(new_x_shape)
        return x.permute(0, 2, 1, 3)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mixed_query_layer = self.query(hidden_states)
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        query_layer = self.transpose_for_scores(mixed_query_layer)
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_scores = attention_scores + attention_mask
        attention_probs = F.softmax(attention_scores, dim=-1)
        attention_probs = self.dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape: List[int] = list(context_layer.size()[:-2])
        new_context_layer_shape.append(self.all_head_size)
        context_layer = context_layer.view(new_context_layer_shape)
        return context_layer


class BertSelfOutput(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: torch.Tensor, input_tensor: torch.Tensor) -> torch.Tensor:
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.LayerNorm(hidden_states + input_tensor)
        return hidden_states


class BertAttention(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        self_outputs = self.self(hidden_states, attention_mask)
        return self.output(self_outputs, hidden_states)


class BertIntermediate(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.dense(hidden_states))  # exact (erf) gelu, HF's "gelu"


class BertOutput(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: torch.Tensor, input_tensor: torch.Tensor) -> torch.Tensor:
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.LayerNorm(hidden_states + input_tensor)
        return hidden_states


class BertLayer(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        attention_output = self.attention(hidden_states, attention_mask)
        intermediate_output = self.intermediate(attention_output)
        return self.output(intermediate_output, attention_output)


class BertEncoder(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(config) for _ in range(config.num_hidden_layers)])

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states, attention_mask)
        return hidden_states


class BertModel(nn.Module):
    """BertModel without the pooler (BertForMaskedLM builds it with add_pooling_layer=False)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        extended_attention_mask = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
        embedding_output = self.embeddings(input_ids)
        return self.encoder(embedding_output, extended_attention_mask)


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = self.dense(hidden_states)
        hidden_states = F.gelu(hidden_states)
        hidden_states = self.LayerNorm(hidden_states)
        return hidden_states


class BertLMPredictionHead(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.decoder.bias = self.bias  # as HF: decoder.bias and predictions.bias are one Parameter

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = self.transform(hidden_states)
        hidden_states = self.decoder(hidden_states)
        return hidden_states


class BertOnlyMLMHead(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.predictions = BertLMPredictionHead(config)

    def forward(self, sequence_output: torch.Tensor) -> torch.Tensor:
        return self.predictions(sequence_output)


class BertForMaskedLM(nn.Module):
    """forward(input_ids i64[B,S], attention_mask i64[B,S], labels i64[B,S]) -> scalar MLM loss
    (labels == -100 are ignored)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.vocab_size = config.vocab_size
        self.bert = BertModel(config)
        self.cls = BertOnlyMLMHead(config)
        init_params_(self)
        # tied: one Parameter, two paths
        self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                labels: torch.Tensor) -> torch.Tensor:
        sequence_output = self.bert(input_ids, attention_mask)
        prediction_scores = self.cls(sequence_output)
        masked_lm_loss = F.cross_entropy(prediction_scores.view(-1, self.vocab_size),
                                         labels.view(-1), ignore_index=-100)
        return masked_lm_loss


def build() -> BertForMaskedLM:
    return BertForMaskedLM(BertConfig())


SPECS = [
    ModelSpec("bert", build, [
        InputSpec("input_ids", torch.int64, [2, 16], kind="int", low=0, high=128),
        InputSpec("attention_mask", torch.int64, [2, 16], kind="mask"),
        InputSpec("labels", torch.int64, [2, 16], kind="mlm", low=0, high=128),
    ]),
]
