"""Models: the ``ModelConfig`` record and the one place that knows Hugging Face key aliases."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ridgeline.errors import InvalidConfigError, UnsupportedArchitectureError

# model_type -> (gated MLP, norm kind, attention and MLP in parallel off one norm)
ARCHITECTURES: dict[str, tuple[bool, str, bool]] = {
    "llama": (True, "rmsnorm", False),
    "mistral": (True, "rmsnorm", False),
    "mixtral": (True, "rmsnorm", False),
    "qwen2": (True, "rmsnorm", False),
    "qwen2_moe": (True, "rmsnorm", False),
    "qwen3": (True, "rmsnorm", False),
    "gemma": (True, "rmsnorm", False),
    "phi3": (True, "rmsnorm", False),
    "deepseek_v2": (True, "rmsnorm", False),
    "deepseek_v3": (True, "rmsnorm", False),
    "falcon": (False, "layernorm", True),
    "RefinedWebModel": (False, "layernorm", True),
    "RefinedWeb": (False, "layernorm", True),
    "opt": (False, "layernorm", False),
    "gptj": (False, "layernorm", True),
}


# model types whose attention normalises each head of q and k (modeling_qwen3.py: q_norm, k_norm)
QK_NORM_TYPES = ("qwen3",)


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer, in Hugging Face vocabulary."""

    name: str
    model_type: str
    hidden_size: int  # d_model: width of the residual stream
    num_layers: int  # decoder layers
    num_heads: int  # query heads
    num_kv_heads: int  # key/value heads: = num_heads (MHA), < (GQA), 1 (MQA)
    head_dim: int  # per-head width; hidden_size / num_heads unless set
    intermediate_size: int  # MLP width (dense layers)
    vocab_size: int
    tie_word_embeddings: bool  # lm_head shares the embedding matrix
    hidden_act: str = "silu"
    gated_mlp: bool = True  # gate_proj * act(up_proj) (SwiGLU/GeGLU) vs act(up_proj)
    norm: str = "rmsnorm"  # rmsnorm | layernorm (with bias) | layernorm_nobias (ops.NORM_OPS)
    parallel_attn: bool = False  # attention and MLP read the same normed input (GPT-J, Falcon)
    # Falcon's new decoder architecture (40B, 180B): in parallel, attention and the MLP each
    # read their own LayerNorm of the residual (ln_attn, ln_mlp)
    mlp_norm_in_parallel: bool = False
    qk_norm: bool = False  # an RMSNorm over each head of q and of k before RoPE (Qwen3)
    rotary: bool = True  # rotary position embedding applied to q and k
    max_position_embeddings: int = 0
    sliding_window: int | None = None  # attention sees at most this many past tokens
    # mixture of experts (0 experts: dense)
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0
    shared_expert_intermediate_size: int = 0
    first_dense_layers: int = 0  # leading layers that keep a dense MLP (DeepSeek)
    # multi-head latent attention (0: plain attention)
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    notes: tuple[str, ...] = field(default=(), compare=False)  # what the config left to the architecture

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def attention_kind(self) -> str:
        if self.is_mla:
            return "MLA"
        if self.num_kv_heads == self.num_heads:
            return "MHA"
        return "MQA" if self.num_kv_heads == 1 else "GQA"

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.first_dense_layers if self.is_moe else 0

    @classmethod
    def from_hf_config(cls, raw: Mapping[str, Any], name: str | None = None, where: str = "config") -> ModelConfig:
        return _from_hf(raw, name, where)


def _first(raw: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if raw.get(key) is not None:
            return raw[key]
    return None


def _positive(raw: Mapping[str, Any], where: str, *keys: str, default: int | None = None) -> int:
    value = _first(raw, *keys)
    if value is None:
        if default is not None:
            return default
        raise InvalidConfigError(where, f"missing '{keys[0]}' (also accepted: {', '.join(keys[1:]) or '-'})")
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidConfigError(where, f"'{keys[0]}' must be a positive integer, got {value!r}")
    return value


# published configs that omit the MLP width: modeling_falcon.py (ffn_hidden_size None) and
# modeling_gptj.py (n_inner None) take 4 x hidden_size; any other architecture must give it
MLP_4X_TYPES = ("falcon", "RefinedWebModel", "RefinedWeb", "gptj")


def _mlp_note(raw: Mapping[str, Any], model_type: str, hidden: int) -> tuple[str, ...]:
    if _first(raw, "intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size") is not None:
        return ()
    return (f"no intermediate_size in the config: {model_type}'s MLP is 4 x hidden_size = {4 * hidden} wide",)


def _moe_fields(raw: Mapping[str, Any], where: str) -> dict[str, int]:
    experts = _first(raw, "num_local_experts", "num_experts", "n_routed_experts") or 0
    if not experts:
        return {}
    dense_first = int(raw.get("first_k_dense_replace") or 0)
    return {
        "num_experts": int(experts),
        "num_experts_per_tok": _positive(raw, where, "num_experts_per_tok"),
        "moe_intermediate_size": _positive(raw, where, "moe_intermediate_size", "intermediate_size"),
        "num_shared_experts": int(
            raw.get("n_shared_experts") or (1 if raw.get("shared_expert_intermediate_size") else 0)
        ),
        "shared_expert_intermediate_size": int(raw.get("shared_expert_intermediate_size") or 0),
        "first_dense_layers": dense_first,
    }


def _mla_fields(raw: Mapping[str, Any]) -> dict[str, int]:
    if not raw.get("kv_lora_rank"):
        return {}
    return {
        key: int(raw.get(key) or 0)
        for key in ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
    }


def _sliding_window(raw: Mapping[str, Any]) -> int | None:
    if raw.get("use_sliding_window") is False:
        return None
    window = raw.get("sliding_window")
    return int(window) if isinstance(window, int) and window > 0 else None


def _activation(raw: Mapping[str, Any], model_type: str) -> str:
    """The MLP activation's Hugging Face name. Gemma runs ``hidden_activation`` (transformers'
    GemmaMLP; tanh-GELU when unset) whatever its ``hidden_act`` says."""
    if model_type == "gemma":
        return str(raw.get("hidden_activation") or "gelu_pytorch_tanh")
    return str(_first(raw, "hidden_act", "activation_function", "hidden_activation") or "gelu")


def _from_hf(raw: Mapping[str, Any], name: str | None, where: str) -> ModelConfig:
    if not isinstance(raw, Mapping):
        raise InvalidConfigError(where, "expected a JSON object at the top level")
    model_type = raw.get("model_type")
    if not model_type:
        raise InvalidConfigError(where, "missing 'model_type'; is this a Hugging Face config.json?")
    if model_type not in ARCHITECTURES:
        raise UnsupportedArchitectureError(model_type, ARCHITECTURES)
    gated, norm, parallel = ARCHITECTURES[model_type]
    hidden = _positive(raw, where, "hidden_size", "n_embd", "d_model")
    heads = _positive(raw, where, "num_attention_heads", "n_head", "num_heads")
    if model_type.startswith(("falcon", "Refined")) and not raw.get("new_decoder_architecture"):
        kv_default = 1 if raw.get("multi_query", True) else heads
        parallel = bool(raw.get("parallel_attn", True))
    else:
        kv_default = heads
    # modeling_falcon.py: ln_attn and ln_mlp when the new architecture keeps two norms
    two_norms = bool(raw.get("new_decoder_architecture")) and (raw.get("num_ln_in_parallel_attn") or 2) == 2
    kv_heads = _positive(raw, where, "num_key_value_heads", "num_kv_heads", default=kv_default)
    if heads % kv_heads:
        raise InvalidConfigError(
            where, f"num_attention_heads ({heads}) is not a multiple of num_key_value_heads ({kv_heads})"
        )
    mla = _mla_fields(raw)
    if raw.get("head_dim") is None and not mla and hidden % heads:
        raise InvalidConfigError(
            where,
            f"hidden_size ({hidden}) is not a multiple of "
            f"num_attention_heads ({heads}); set head_dim if the "
            "model's heads are not hidden_size / heads wide",
        )
    head_dim = _positive(raw, where, "head_dim", default=hidden // heads)
    if mla:
        head_dim = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]
    act = _activation(raw, model_type)
    mlp_4x = 4 * hidden if model_type in MLP_4X_TYPES else None
    return ModelConfig(
        name=name or str(raw.get("_name_or_path") or model_type),
        model_type=model_type,
        hidden_size=hidden,
        num_layers=_positive(raw, where, "num_hidden_layers", "n_layer", "num_layers"),
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=_positive(
            raw, where, "intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size", default=mlp_4x
        ),
        vocab_size=_positive(raw, where, "vocab_size"),
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", True)),
        hidden_act=act,
        gated_mlp=gated,
        norm=norm,
        parallel_attn=parallel,
        mlp_norm_in_parallel=parallel and two_norms,
        qk_norm=model_type in QK_NORM_TYPES,
        rotary=model_type != "opt",
        max_position_embeddings=int(_first(raw, "max_position_embeddings", "n_positions") or 0),
        sliding_window=_sliding_window(raw),
        **_moe_fields(raw, where),
        **mla,
        notes=_mlp_note(raw, model_type, hidden),
    )
