"""Tiny, randomly initialized Hugging Face `transformers` models (trace only).

Needs transformers (pinned in third_party/python-requirements.txt, installed into
third_party/.pydeps); run with PYTHONPATH=third_party/.pydeps /usr/bin/python3.

HF's own forward signatures put many optional arguments between input_ids and labels, so each
model is wrapped in a small nn.Module whose forward takes exactly the inputs below; the HF model
is the wrapper's submodule `model`, so every HF path gets the prefix "model.":
  hf_gpt2: model.transformer.wte.weight, model.transformer.h.0.attn.c_attn.weight, ...,
           model.lm_head.weight
  hf_bert: model.bert.embeddings.word_embeddings.weight,
           model.bert.encoder.layer.0.attention.self.query.weight, ...,
           model.cls.predictions.decoder.weight, model.cls.predictions.bias
  hf_llama: model.model.embed_tokens.weight, model.model.layers.0.self_attn.q_proj.weight, ...,
            model.lm_head.weight. Its causal mask is written in place (a constant multiplied
            by a comparison, then the columns of the attention mask copied through a slice).
  hf_qwen2, hf_mistral: LLaMA's shape and paths (Mistral with a sliding window of 8).
  hf_roberta: model.roberta.embeddings.word_embeddings.weight, ..., model.lm_head.decoder.weight
  hf_t5: model.shared.weight, model.encoder.block.0.layer.0.SelfAttention.q.weight, ...,
         model.lm_head.weight
  hf_gptj: model.transformer.wte.weight, model.transformer.h.0.attn.q_proj.weight, ...,
           model.lm_head.weight
  hf_bloom: model.transformer.word_embeddings.weight,
            model.transformer.h.0.self_attention.query_key_value.weight, ..., model.lm_head.weight
  hf_opt, hf_qwen2_own, hf_mistral_own, hf_roberta_own, hf_gpt_neo, hf_albert, hf_bloom_own:
          HF's own paths, no prefix
          (model.decoder.layers.0.self_attn.q_proj.weight, model.layers.0.mlp.up_proj.weight,
          roberta.encoder.layer.0.attention.self.query.weight, ..., lm_head.weight): the model
          is OPTForCausalLM (Qwen2ForCausalLM, ...) itself, its forward narrowed to
          (input_ids, labels: i64[8,32]), so that the shipped schedules (schedules/opt.sched,
          qwen2.sched, ...) apply as to a user's model.
With torchscript=True HF *clones* tied weights instead of sharing them (PreTrainedModel.
_tie_or_clone_weights), so model.lm_head.weight / model.cls.predictions.decoder.weight are
separate parameters holding a copy of the word embedding.
The wrappers return only the loss (HF returns a tuple (loss, logits, ...) with torchscript=True).
"""

import torch
import torch.nn as nn

from common import InputSpec, ModelSpec

SCRIPT_ERROR = ("Hugging Face transformers models are not scriptable with torch.jit.script; "
                "use --mode trace")


def _quiet_transformers():
    import transformers
    transformers.logging.set_verbosity_error()
    return transformers


class HFGPT2LMLoss(nn.Module):
    """forward(input_ids i64[2,16], labels i64[2,16]) -> loss. HF paths prefixed with "model."."""

    def __init__(self):
        super().__init__()
        transformers = _quiet_transformers()
        config = transformers.GPT2Config(
            vocab_size=128, n_positions=32, n_embd=32, n_layer=2, n_head=2,
            resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1,
            torchscript=True, attn_implementation="eager")
        self.model = transformers.GPT2LMHeadModel(config)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, labels=labels)[0]


class MaskedInputsLoss(nn.Module):
    """forward(input_ids, attention_mask, labels: i64[2,16]) -> loss, of the HF model
    `transformers.<model_class>` with a tiny `transformers.<config_class>(**config)`; its paths
    get the prefix "model."."""

    def __init__(self, model_class: str, config_class: str, **config):
        super().__init__()
        transformers = _quiet_transformers()
        config = getattr(transformers, config_class)(
            torchscript=True, attn_implementation="eager", **config)
        self.model = getattr(transformers, model_class)(config)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                labels: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)[0]


class HFBertMLMLoss(MaskedInputsLoss):
    def __init__(self):
        super().__init__(
            "BertForMaskedLM", "BertConfig",
            vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=32, type_vocab_size=2,
            hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)


# The tiny decoder of the LLaMA family: LLaMA, Qwen2 and Mistral share it.
DECODER_CONFIG = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)


class HFLlamaLMLoss(MaskedInputsLoss):
    def __init__(self):
        super().__init__("LlamaForCausalLM", "LlamaConfig", **DECODER_CONFIG)


class HFQwen2LMLoss(MaskedInputsLoss):
    def __init__(self):
        super().__init__("Qwen2ForCausalLM", "Qwen2Config", **DECODER_CONFIG)


class HFMistralLMLoss(MaskedInputsLoss):
    """Its sliding window is shorter than the sequence, so that the window masks."""

    def __init__(self):
        super().__init__("MistralForCausalLM", "MistralConfig", sliding_window=8,
                         **DECODER_CONFIG)


# Its position ids count the tokens that are not padding (id 1), after the padding id.
ROBERTA_CONFIG = dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=40, type_vocab_size=1,
                      hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)


class HFRobertaMLMLoss(MaskedInputsLoss):
    def __init__(self):
        super().__init__("RobertaForMaskedLM", "RobertaConfig", **ROBERTA_CONFIG)


class HFT5Loss(MaskedInputsLoss):
    """Its decoder inputs are the labels shifted right after token 0."""

    def __init__(self):
        super().__init__(
            "T5ForConditionalGeneration", "T5Config",
            vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
            num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=16,
            dropout_rate=0.1, decoder_start_token_id=0, pad_token_id=0)


class HFGPTJLMLoss(MaskedInputsLoss):
    """Its rotary embedding gathers rows of a sin/cos table by position ids and repeats each
    column twice (`repeat_interleave`)."""

    def __init__(self):
        super().__init__(
            "GPTJForCausalLM", "GPTJConfig",
            vocab_size=128, n_positions=32, n_embd=32, n_layer=2, n_head=4, rotary_dim=4,
            n_inner=64, resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1)


class HFBloomLMLoss(MaskedInputsLoss):
    """Its ALiBi biases are slopes times positions counted from the attention mask."""

    def __init__(self):
        super().__init__(
            "BloomForCausalLM", "BloomConfig",
            vocab_size=128, hidden_size=32, n_layer=2, n_head=4, hidden_dropout=0.1,
            attention_dropout=0.1)


def masked_inputs_spec(name, build, labels_kind):
    """A spec of forward(input_ids, attention_mask, labels: i64[2,16]) -> loss."""
    return ModelSpec(name, build, [
        InputSpec("input_ids", torch.int64, [2, 16], kind="int", low=0, high=128),
        InputSpec("attention_mask", torch.int64, [2, 16], kind="mask"),
        InputSpec("labels", torch.int64, [2, 16], kind=labels_kind, low=0, high=128),
    ], modes=("trace",), mode_error=SCRIPT_ERROR, requires="transformers")


def own_names_loss(model_class: str, config_class: str, **config) -> nn.Module:
    """The HF model `transformers.<model_class>` itself, with a tiny
    `transformers.<config_class>(**config)`, its forward narrowed to (input_ids, labels) -> loss:
    its module paths are HF's own, so that a shipped schedule applies as to a user's model."""
    transformers = _quiet_transformers()

    class LMLoss(getattr(transformers, model_class)):
        def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            return super().forward(input_ids=input_ids, labels=labels)[0]

    return LMLoss(getattr(transformers, config_class)(
        torchscript=True, attn_implementation="eager", **config))


def own_names_spec(name, model_class, config_class, labels_kind, **config):
    """A spec of own_names_loss(...) whose forward takes input_ids, labels: i64[8,32]."""
    return ModelSpec(name, lambda: own_names_loss(model_class, config_class, **config), [
        InputSpec("input_ids", torch.int64, [8, 32], kind="int", low=0, high=128),
        InputSpec("labels", torch.int64, [8, 32], kind=labels_kind, low=0, high=128),
    ], modes=("trace",), mode_error=SCRIPT_ERROR, requires="transformers")


SPECS = [
    ModelSpec("hf_gpt2", HFGPT2LMLoss, [
        InputSpec("input_ids", torch.int64, [2, 16], kind="int", low=0, high=128),
        InputSpec("labels", torch.int64, [2, 16], kind="int", low=0, high=128),
    ], modes=("trace",), mode_error=SCRIPT_ERROR, requires="transformers"),
    masked_inputs_spec("hf_bert", HFBertMLMLoss, "mlm"),
    masked_inputs_spec("hf_llama", HFLlamaLMLoss, "int"),
    masked_inputs_spec("hf_qwen2", HFQwen2LMLoss, "int"),
    masked_inputs_spec("hf_mistral", HFMistralLMLoss, "int"),
    masked_inputs_spec("hf_roberta", HFRobertaMLMLoss, "mlm"),
    masked_inputs_spec("hf_t5", HFT5Loss, "int"),
    masked_inputs_spec("hf_gptj", HFGPTJLMLoss, "int"),
    masked_inputs_spec("hf_bloom", HFBloomLMLoss, "int"),
    # Positions are offset by 2 in OPT's learned position embedding.
    own_names_spec("hf_opt", "OPTForCausalLM", "OPTConfig", "int",
                   vocab_size=128, hidden_size=32, ffn_dim=64, num_hidden_layers=2,
                   num_attention_heads=4, max_position_embeddings=64, word_embed_proj_dim=32,
                   dropout=0.1),
    own_names_spec("hf_llama_own", "LlamaForCausalLM", "LlamaConfig", "int", **DECODER_CONFIG),
    own_names_spec("hf_qwen2_own", "Qwen2ForCausalLM", "Qwen2Config", "int", **DECODER_CONFIG),
    own_names_spec("hf_mistral_own", "MistralForCausalLM", "MistralConfig", "int",
                   sliding_window=8, **DECODER_CONFIG),
    # A global then a local layer, whose window (8) is shorter than the sequence.
    own_names_spec("hf_gpt_neo", "GPTNeoForCausalLM", "GPTNeoConfig", "int",
                   vocab_size=128, hidden_size=32, intermediate_size=64, num_layers=2,
                   num_heads=4, attention_types=[[["global", "local"], 1]], window_size=8,
                   max_position_embeddings=32, embed_dropout=0.1, attention_dropout=0.1,
                   resid_dropout=0.1),
    # One layer group whose one layer is called by both hidden layers, with its weights shared.
    own_names_spec("hf_albert", "AlbertForMaskedLM", "AlbertConfig", "mlm",
                   vocab_size=128, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                   num_attention_heads=2, intermediate_size=64, max_position_embeddings=32,
                   hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1),
    own_names_spec("hf_roberta_own", "RobertaForMaskedLM", "RobertaConfig", "mlm",
                   **ROBERTA_CONFIG),
    own_names_spec("hf_bloom_own", "BloomForCausalLM", "BloomConfig", "int",
                   vocab_size=128, hidden_size=32, n_layer=2, n_head=4, hidden_dropout=0.1,
                   attention_dropout=0.1),
]
