"""Models: the ``ModelConfig`` record and the one place that knows Hugging Face key aliases."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
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
    "qwen3_moe": (True, "rmsnorm", False),
    "glm4_moe": (True, "rmsnorm", False),
    "gemma2": (True, "rmsnorm", False),
    "gemma3_text": (True, "rmsnorm", False),
    "llama4_text": (True, "rmsnorm", False),
    "gpt_oss": (True, "rmsnorm", False),
    "olmo2": (True, "rmsnorm", False),
    "granite": (True, "rmsnorm", False),
    "granitemoe": (True, "rmsnorm", False),
    "starcoder2": (False, "layernorm", False),
    "cohere": (True, "layernorm_nobias", True),
    "cohere2": (True, "layernorm_nobias", True),
    "gpt_neox": (False, "layernorm", True),
    # Phi-2 (modeling_phi.py): attention and fc1/fc2 both off input_layernorm, summed with the input
    "phi": (False, "layernorm", True),
}

# model types that wrap a text decoder in ``text_config`` (with a vision tower, left out)
WRAPPERS = ("gemma3", "llama4", "mistral3")
# Qwen's vision-language configs: the Qwen2 text decoder under ``text_config`` (transformers
# 4.5x and later) or at the top level beside ``vision_config`` (earlier saves)
QWEN_VL = ("qwen2_vl", "qwen2_5_vl")
# model types read as another's, and why: Kimi K2's config names DeepseekV3ForCausalLM; the
# Qwen VL text decoders are Qwen2's layers, their multimodal rotary turning q and k as
# rotary does (three sections of positions, one per axis: modeling_qwen2_5_vl.py)
QWEN_VL_TEXT = "qwen2's layers; its multimodal rotary prices as rotary"
ALIASES = {
    "kimi_k2": ("deepseek_v3", "the architecture its config names"),
    "qwen2_vl_text": ("qwen2", QWEN_VL_TEXT),
    "qwen2_5_vl_text": ("qwen2", QWEN_VL_TEXT),
}


@dataclass(frozen=True)
class LayerGroup:
    """Layers of one kind: how they attend and which MLP they run; ``count`` of them.

    A model whose layers are all alike has no groups (``ModelConfig.layer_groups`` empty)
    and prices as one kind; a mixed one prices each group once, times its count."""

    label: str  # prefix of its ops' names ("sliding", "global", "chunked-moe", ...)
    count: int  # layers of this kind
    window: int | None = None  # sliding window of W past tokens (None: global)
    chunk: int | None = None  # chunked attention: a query sees its own chunk of C tokens
    rotary: bool = True  # False: no positional encoding (Llama 4's NoPE layers)
    moe: bool = True  # the model's MoE MLP (False: its dense MLP)


# model types whose attention normalises each head of q and k (modeling_qwen3.py: q_norm, k_norm)
QK_NORM_TYPES = ("qwen3", "qwen3_moe", "gemma3_text", "olmo2")
POST_NORM_TYPES = ("gemma2", "gemma3_text")
# a separate lm_head where the config leaves tie_word_embeddings out: the default of
# Llama4TextConfig, MistralConfig and PhiConfig (tie_word_embeddings=False); PretrainedConfig's is True
UNTIED_TYPES = ("llama4_text", "mistral", "phi")
WHOLE_QK_NORM_TYPES = (
    "olmo2",
)  # q_norm and k_norm over the whole projection (modeling_olmo2.py)  # a norm after attention and after the MLP too
# keys that change what a layer computes, with what ridgeline does with each (named in notes)
READ_KEYS = {
    "layer_types": "per-layer attention",
    "sliding_window_pattern": "every n-th layer global, the rest sliding",
    "attention_chunk_size": "chunked attention: within each chunk under flash and paged; a window of the chunk under eager and SDPA",
    "no_rope_layers": "layers without rotary (NoPE)",
    "interleave_moe_layer_step": "MoE on every k-th layer, dense between",
    "decoder_sparse_step": "MoE on every k-th layer, dense between",
    "mlp_only_layers": "dense layers among MoE ones",
    "final_logit_softcapping": "tanh soft-cap of the logits (logit_softcap)",
    "attn_logit_softcapping": "tanh soft-cap of attention scores: inside the attention kernel, not priced (3 ops a score)",
    "partial_rotary_factor": "rotary over part of each head, priced over all of it (an upper bound)",
    "rotary_pct": "rotary over part of each head, priced over all of it (an upper bound)",
    "use_parallel_residual": "attention and MLP in parallel, each off its own norm",
    "use_qk_norm": "a norm over q and k",
    "qk_layernorm": "a LayerNorm over each head of q and k (Phi)",
    "swiglu_limit": "gate and up clamped before the activation: not priced (2 ops an element)",
    "logit_scale": "logits scaled by a constant: not priced (one multiply a logit)",
    "logits_scaling": "logits scaled by a constant: not priced (one multiply a logit)",
    "residual_multiplier": "branches scaled by a constant: not priced (one multiply an element)",
    "embedding_multiplier": "embeddings scaled by a constant: not priced (one multiply an element)",
    "attn_temperature_tuning": "NoPE layers' queries scaled by position: not priced (one multiply an element)",
}
# keys whose compute ridgeline does not model: reading past them would misprice the model
UNMODELLED_KEYS = {
    "altup_num_inputs": "Gemma 3n's AltUp",
    "num_kv_shared_layers": "KV-cache sharing across layers",
    "hidden_size_per_layer_input": "per-layer input embeddings",
    "cross_layer_attention": "cross-layer attention",
    "linear_attention_layers": "linear-attention layers",
}


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
    qk_norm_whole: bool = False  # that norm over all of q's and k's heads at once: a weight as wide (OLMo 2)
    rotary: bool = True  # rotary position embedding applied to q and k
    max_position_embeddings: int = 0
    sliding_window: int | None = None  # attention sees at most this many past tokens
    attention_chunk: int | None = None  # chunked: a query sees its own chunk (sliding_window holds it too)
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
    # per-layer kinds, grouped (empty: every layer alike, priced by the fields above)
    layer_groups: tuple[LayerGroup, ...] = ()
    post_norms: bool = False  # a norm after attention and after the MLP too (Gemma 2/3, OLMo 2)
    attention_sinks: bool = False  # a learned logit per head in the softmax's sum (gpt-oss)
    logit_softcap: float = 0.0  # logits = cap * tanh(logits / cap) (Gemma 2); 0: none
    # the routed experts' stored format where the checkpoint keeps them narrower than the
    # rest ("mxfp4": gpt-oss); "" = the settings' weight type, as every linear layer
    expert_format: str = ""
    notes: tuple[str, ...] = ()  # keys beyond the uniform layer that this config was read with
    defaults: tuple[str, ...] = field(default=(), compare=False)  # what the config left to the architecture

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def transformers_sdpa(self) -> bool:
        """Whether transformers runs this model's attention through SDPA by default: not
        gpt-oss, whose sinks SDPA cannot add (GptOssPreTrainedModel has ``_supports_sdpa =
        False``, models/gpt_oss/modeling_gpt_oss.py, huggingface/transformers@00d4b3d)."""
        return not self.attention_sinks

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
        if self.layer_groups:
            return sum(g.count for g in self.layer_groups if g.moe) if self.is_moe else 0
        return self.num_layers - self.first_dense_layers if self.is_moe else 0

    @property
    def windows(self) -> tuple[int, ...]:
        """The distinct KV lengths at which some layer's attention stops growing."""
        if not self.layer_groups:
            return (self.sliding_window,) if self.sliding_window else ()
        return tuple(sorted({group_of(self, g).sliding_window for g in self.layer_groups} - {None}))

    @classmethod
    def from_hf_config(cls, raw: Mapping[str, Any], name: str | None = None, where: str = "config") -> ModelConfig:
        return _from_hf(raw, name, where)


def group_of(c: ModelConfig, g: LayerGroup) -> ModelConfig:
    """The uniform model of one group's layers: its count, attention and MLP. A chunk of C
    is a window of C to the cache and to transformers' masked paths (a query may see up to
    C keys) and exact to the engines' kernels (``layers.engine_chunk``)."""
    moe = dict(first_dense_layers=0) if g.moe else dict(num_experts=0, num_experts_per_tok=0, first_dense_layers=0)
    return replace(
        c,
        num_layers=g.count,
        sliding_window=g.window or g.chunk,
        attention_chunk=g.chunk,
        rotary=c.rotary and g.rotary,
        layer_groups=(),
        **moe,
    )


# the fields every reader needs, each with its aliases
REQUIRED = (
    ("hidden_size", "n_embd", "d_model"),
    ("num_attention_heads", "n_head", "num_heads"),
    ("num_hidden_layers", "n_layer", "num_layers"),
    ("vocab_size",),
)


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


# where a config states the dense MLP's width (Llama 4: intermediate_size is an expert's)
MLP_WIDTH = ("intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size")
MLP_WIDTH_KEYS = {"llama4": ("intermediate_size_mlp", *MLP_WIDTH), "llama4_text": ("intermediate_size_mlp", *MLP_WIDTH)}
# published configs that omit the MLP width: modeling_falcon.py (ffn_hidden_size None) and
# modeling_gptj.py (n_inner None) take 4 x hidden_size; any other architecture must give it
MLP_4X_TYPES = ("falcon", "RefinedWebModel", "RefinedWeb", "gptj")


# keys a family's own config.json leaves to its transformers class, with the class's default:
# Gemma 3's omit these (gemma-3-4b-it states no heads: its 8, 4 and 256 are the defaults);
# Gemma3TextConfig in configuration_gemma3.py, huggingface/transformers@008f5c8c29be84d4721dc6d1e0fcd72300580be4
CLASS_DEFAULTS = {
    "gemma3_text": (
        "Gemma3TextConfig",
        {
            "vocab_size": 262_208,
            "num_attention_heads": 8,
            "num_key_value_heads": 4,
            "head_dim": 256,
            "sliding_window_pattern": 6,
            "max_position_embeddings": 131_072,
        },
    ),
}


def _class_defaults(raw: Mapping[str, Any], model_type: str) -> tuple[Mapping[str, Any], tuple[str, ...]]:
    """``raw`` with the keys its architecture's class fills in where the config leaves them
    out (``CLASS_DEFAULTS``; a ``layer_types`` list names every layer, so no pattern), and one
    note naming each."""
    cls, defaults = CLASS_DEFAULTS.get(model_type, ("", {}))
    given = ("sliding_window_pattern",) if raw.get("layer_types") is not None else ()
    filled = {k: v for k, v in defaults.items() if raw.get(k) is None and k not in given}
    named = ", ".join(f"{key} {value}" for key, value in filled.items())
    return {**raw, **filled}, (f"the config leaves these to {cls}'s defaults: {named}",) if filled else ()


def _mlp_note(raw: Mapping[str, Any], model_type: str, hidden: int) -> tuple[str, ...]:
    if _first(raw, "intermediate_size_mlp", *MLP_WIDTH) is not None:
        return ()
    return (f"no intermediate_size in the config: {model_type}'s MLP is 4 x hidden_size = {4 * hidden} wide",)


def _moe_fields(raw: Mapping[str, Any], model_type: str, where: str) -> dict[str, int]:
    experts = _first(raw, "num_local_experts", "num_experts", "n_routed_experts") or 0
    if not experts:
        return {}
    dense_first = int(raw.get("first_k_dense_replace") or 0)
    # Llama 4: every MoE layer adds one shared expert as wide as a routed one (modeling_llama4.py)
    shared = 1 if model_type == "llama4_text" else raw.get("n_shared_experts")
    return {
        "num_experts": int(experts),
        "num_experts_per_tok": _positive(raw, where, "num_experts_per_tok", "experts_per_token"),
        "moe_intermediate_size": _positive(raw, where, "moe_intermediate_size", "intermediate_size"),
        "num_shared_experts": int(shared or (1 if raw.get("shared_expert_intermediate_size") else 0)),
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


# what a layer_types entry means: (window, chunked)
LAYER_TYPES = {"full_attention": (False, False), "sliding_attention": (True, False), "chunked_attention": (False, True)}


def _attention_kinds(raw: Mapping[str, Any], model_type: str, n: int, where: str) -> list[tuple[bool, bool]]:
    """Per layer, (sliding, chunked): from ``layer_types``, ``sliding_window_pattern``
    (layer i slides unless (i + 1) % pattern = 0: Gemma 3, Command R7B), Gemma 2's
    alternation (even layers slide: modeling_gemma2.py) or Llama 4's chunked layers (those
    with rotary: modeling_llama4.py); every layer global otherwise."""
    types = raw.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != n or any(t not in LAYER_TYPES for t in types):
            known = ", ".join(LAYER_TYPES)
            raise InvalidConfigError(where, f"'layer_types' must list {n} of {known}; got {types!r}")
        return [LAYER_TYPES[t] for t in types]
    pattern = raw.get("sliding_window_pattern")
    if isinstance(pattern, int) and pattern > 0:
        return [((i + 1) % pattern != 0, False) for i in range(n)]
    if model_type == "gemma2":
        return [(i % 2 == 0, False) for i in range(n)]
    if raw.get("attention_chunk_size"):
        return [(False, bool(r)) for r in _rope_layers(raw, n)]
    return [(False, False)] * n


def _rope_layers(raw: Mapping[str, Any], n: int) -> list[bool]:
    """Per layer, whether it turns q and k (``no_rope_layers``: 1 where rotary is used;
    Llama 4 without the list: every ``no_rope_layer_interval``-th layer (4) is NoPE, as
    Llama4TextConfig fills it in)."""
    flags = raw.get("no_rope_layers")
    if isinstance(flags, list) and len(flags) == n:
        return [bool(f) for f in flags]
    if raw.get("model_type") == "llama4_text":
        every = int(raw.get("no_rope_layer_interval") or 4)
        return [(i + 1) % every != 0 for i in range(n)]
    return [True] * n


def _moe_layers(raw: Mapping[str, Any], n: int) -> list[bool]:
    """Per layer, whether its MLP is the mixture of experts: every k-th layer
    (``interleave_moe_layer_step``, Llama 4; ``decoder_sparse_step``, Qwen MoE) but those in
    ``mlp_only_layers``."""
    step = int(_first(raw, "interleave_moe_layer_step", "decoder_sparse_step") or 1)
    dense = set(raw.get("mlp_only_layers") or ())
    return [(i + 1) % step == 0 and i not in dense for i in range(n)]


def _layer_groups(raw: Mapping[str, Any], model_type: str, n: int, moe: bool, where: str) -> tuple[LayerGroup, ...]:
    """The config's layers grouped by kind, in order of first appearance; none when alike."""
    window = raw.get("sliding_window") if isinstance(raw.get("sliding_window"), int) else None
    chunk = raw.get("attention_chunk_size") or None
    attention = _attention_kinds(raw, model_type, n, where)
    rope = _rope_layers(raw, n)
    if model_type == "cohere2":  # modeling_cohere2.py: rotary on the sliding layers only
        rope = [sliding for sliding, _ in attention]
    mlp = _moe_layers(raw, n) if moe else [True] * n
    kinds = [(window if s else None, chunk if c else None, r, m) for (s, c), r, m in zip(attention, rope, mlp)]
    if any(s for s, _ in attention) and not window:
        raise InvalidConfigError(where, "sliding layers but no positive 'sliding_window'")
    counts = dict.fromkeys(kinds, 0)
    for kind in kinds:
        counts[kind] += 1
    if len(counts) == 1 and next(iter(counts))[1:] == (None, True, True):
        return ()  # all alike: the uniform model (a window, if any, is the model's)
    mixed_mlp = len({k[3] for k in counts}) > 1
    return tuple(
        LayerGroup(_label(w, c, r, m, mixed_mlp), count, w or None, c or None, r, m)
        for (w, c, r, m), count in counts.items()
    )


def _label(window, chunk, rotary: bool, moe: bool, mixed_mlp: bool) -> str:
    parts = ["sliding" if window else "chunked" if chunk else "global"]
    parts += [] if rotary else ["nope"]
    parts += (["moe" if moe else "dense"]) if mixed_mlp else []
    return "-".join(parts)


def _activation(raw: Mapping[str, Any], model_type: str) -> str:
    """The MLP activation's Hugging Face name. Gemma runs ``hidden_activation`` (transformers'
    GemmaMLP; tanh-GELU when unset) whatever its ``hidden_act`` says."""
    if model_type in ("gemma", "gemma2", "gemma3_text"):
        return str(raw.get("hidden_activation") or "gelu_pytorch_tanh")
    return str(_first(raw, "hidden_act", "activation_function", "hidden_activation") or "gelu")


def _text_decoder(raw: Mapping[str, Any], where: str) -> tuple[Mapping[str, Any], tuple[str, ...]]:
    """A wrapper's ``text_config`` (its own keys first), or the config itself."""
    if not isinstance(raw, Mapping):
        raise InvalidConfigError(where, "expected a JSON object at the top level")
    if raw.get("model_type") in QWEN_VL and not isinstance(raw.get("text_config"), Mapping):
        note = (
            f"{raw['model_type']}: the text decoder (its top-level keys, {QWEN_VL_TEXT}); the vision tower is left out"
        )
        return {**{k: v for k, v in raw.items() if k != "vision_config"}, "model_type": "qwen2"}, (note,)
    if raw.get("model_type") not in (*WRAPPERS, *QWEN_VL):
        return raw, ()
    text = raw.get("text_config")
    if not isinstance(text, Mapping) or not text.get("model_type"):
        raise InvalidConfigError(where, f"'{raw['model_type']}' needs a 'text_config' with its 'model_type'")
    note = f"{raw['model_type']}: the text decoder (text_config, {text['model_type']}); the vision tower is left out"
    inner = {k: v for k, v in raw.items() if k in ("_name_or_path", "tie_word_embeddings")}
    return {**inner, **text}, (note,)


def _changes_compute(value: Any) -> bool:
    """Whether a ``READ_KEYS`` value changes what a layer computes: set, not false, zero or
    empty, and not a step of 1 (every layer alike); ``true`` counts (in Python it equals 1)."""
    if isinstance(value, bool):
        return value
    return value not in (None, 0, 1, [], "")


def _notes(raw: Mapping[str, Any], groups: tuple[LayerGroup, ...], where: str) -> tuple[str, ...]:
    """What the reader took from keys beyond the uniform layer; an error for one it cannot model."""
    for key, what in UNMODELLED_KEYS.items():
        if raw.get(key):
            raise InvalidConfigError(where, f"'{key}' ({what}) is not modelled")
    notes = [f"{key}: {what}" for key, what in READ_KEYS.items() if _changes_compute(raw.get(key))]
    quant = raw.get("quantization_config")
    if _expert_format(raw):
        notes.append(
            "quantization_config (mxfp4): routed experts as stored, MXFP4 (4.25 bits a weight; "
            "settings of 4 bits or fewer win), the rest at the settings' types"
        )
    elif isinstance(quant, Mapping):  # the checkpoint's format; what is priced is --dtype / --w-bits
        method = quant.get("quant_method", "?")
        notes.append(f"quantization_config ({method}): weights priced at the settings' types, not the checkpoint's")
    if raw.get("model_type") == "gpt_oss":
        notes.append("attention sinks: a learned logit per head (its weights counted; inside the attention kernel)")
    if groups:
        notes.append("layers: " + ", ".join(f"{g.count} {g.label}" for g in groups))
    return tuple(notes)


def _from_hf(raw: Mapping[str, Any], name: str | None, where: str) -> ModelConfig:
    raw, wrapped = _text_decoder(raw, where)
    model_type = raw.get("model_type")
    if model_type in ALIASES:
        alias, why = ALIASES[model_type]
        wrapped += (f"{model_type}: read as {alias} ({why})",)
        raw = {**raw, "model_type": alias}
        model_type = raw["model_type"]
    if not model_type:
        raise InvalidConfigError(where, "missing 'model_type'; is this a Hugging Face config.json?")
    if model_type not in ARCHITECTURES:
        nearest = (difflib.get_close_matches(str(model_type), ARCHITECTURES, 1, 0.0) or [""])[0]
        missing = next((keys[0] for keys in REQUIRED if _first(raw, *keys) is None), "")
        raise UnsupportedArchitectureError(
            model_type, (*ARCHITECTURES, *WRAPPERS, *QWEN_VL, *ALIASES), nearest, missing
        )
    raw, filled = _class_defaults(raw, model_type)
    gated, norm, parallel = ARCHITECTURES[model_type]
    hidden = _positive(raw, where, "hidden_size", "n_embd", "d_model")
    heads = _positive(raw, where, "num_attention_heads", "n_head", "num_heads")
    for span in ("sliding_window", "attention_chunk_size"):  # null: none; else a length
        if raw.get(span) is not None:
            _positive(raw, where, span)
    if model_type.startswith(("falcon", "Refined")) and not raw.get("new_decoder_architecture"):
        kv_default = 1 if raw.get("multi_query", True) else heads
        parallel = bool(raw.get("parallel_attn", True))
    else:
        kv_default = heads
    # modeling_falcon.py: ln_attn and ln_mlp when the new architecture keeps two norms
    two_norms = bool(raw.get("new_decoder_architecture")) and (raw.get("num_ln_in_parallel_attn") or 2) == 2
    if model_type == "gpt_neox":  # modeling_gpt_neox.py: mlp(post_attention_layernorm(x)) beside attention
        parallel = two_norms = bool(raw.get("use_parallel_residual", True))
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
    layers = _positive(raw, where, "num_hidden_layers", "n_layer", "num_layers")
    moe = _moe_fields(raw, model_type, where)
    groups = _layer_groups(raw, model_type, layers, bool(moe), where)
    mlp_4x = 4 * hidden if model_type in MLP_4X_TYPES else None
    return ModelConfig(
        name=name or str(raw.get("_name_or_path") or model_type),
        model_type=model_type,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=_positive(raw, where, *MLP_WIDTH_KEYS.get(model_type, MLP_WIDTH), default=mlp_4x),
        vocab_size=_positive(raw, where, "vocab_size"),
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", model_type not in UNTIED_TYPES)),
        hidden_act=act,
        gated_mlp=gated,
        norm=norm,
        parallel_attn=parallel,
        mlp_norm_in_parallel=parallel and two_norms,
        qk_norm=model_type in QK_NORM_TYPES or bool(raw.get("use_qk_norm") or raw.get("qk_layernorm")),
        rotary=model_type != "opt",
        max_position_embeddings=int(_first(raw, "max_position_embeddings", "n_positions") or 0),
        sliding_window=None if groups else _uniform_window(raw),
        **moe,
        **mla,
        layer_groups=groups,
        post_norms=model_type in POST_NORM_TYPES,
        qk_norm_whole=model_type in WHOLE_QK_NORM_TYPES,
        attention_sinks=model_type == "gpt_oss",
        logit_softcap=float(raw.get("final_logit_softcapping") or 0.0),
        expert_format=_expert_format(raw),
        notes=wrapped + _notes(raw, groups, where),
        defaults=filled + _mlp_note(raw, model_type, hidden),
    )


def _expert_format(raw: Mapping[str, Any]) -> str:
    """The routed experts' stored format: "mxfp4" where a MoE checkpoint keeps them in MXFP4
    and attention and the router as they were (``modules_to_not_convert``: gpt-oss's
    config); "" otherwise (a format over attention too stays priced at the settings')."""
    quant = raw.get("quantization_config")
    if not isinstance(quant, Mapping) or quant.get("quant_method") != "mxfp4":
        return ""
    if not _first(raw, "num_local_experts", "num_experts", "n_routed_experts"):
        return ""
    kept = " ".join(str(m) for m in quant.get("modules_to_not_convert") or ())
    return "mxfp4" if "self_attn" in kept and "router" in kept else ""


def _uniform_window(raw: Mapping[str, Any]) -> int | None:
    """A window every layer keeps; none where ``layer_types`` has no sliding layer."""
    types = raw.get("layer_types")
    if isinstance(types, list) and "sliding_attention" not in types:
        return None
    return _sliding_window(raw)
