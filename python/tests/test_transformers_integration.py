"""flashgen.integrations.transformers against transformers' eager attention on
tiny, randomly initialised models built from configs (nothing downloaded):
logits of a prefill, greedy generate() with a KV cache (dynamic and static),
the gradients of a training loss, and a padded batch, whose mask reaches the
kernels as a mask expression. Llama (GQA), Mistral (sliding window), Gemma 2 (soft cap,
sliding window on every other layer) and gpt-oss (sinks, sliding window), in
float32 on CPU tensors."""

from __future__ import annotations

import copy
import warnings

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

# Needs both of the above.
import flashgen.integrations.transformers as fg_transformers  # noqa: E402

NAME = fg_transformers.register()
VOCAB = 101


def _llama():
    return transformers.LlamaConfig(num_attention_heads=4, num_key_value_heads=2)


def _mistral():
    return transformers.MistralConfig(num_attention_heads=4, num_key_value_heads=2,
                                      sliding_window=5)


def _gemma2():
    # A small soft cap, so that it bends the scores.
    return transformers.Gemma2Config(num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                     query_pre_attn_scalar=16, sliding_window=5,
                                     attn_logit_softcapping=2.0, final_logit_softcapping=None)


def _gpt_oss():
    return transformers.GptOssConfig(num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                     sliding_window=5, num_local_experts=4,
                                     num_experts_per_tok=2)


CONFIGS = {"llama": _llama, "mistral": _mistral, "gemma2": _gemma2, "gpt_oss": _gpt_oss}
if not hasattr(transformers, "Gemma2Config"):
    del CONFIGS["gemma2"]
if not hasattr(transformers, "GptOssConfig"):
    del CONFIGS["gpt_oss"]


def _pair(model_name: str, **overrides):
    """The same randomly initialised model with attn_implementation "eager" and NAME."""
    config = CONFIGS[model_name]()
    config.update(dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                       num_hidden_layers=2, max_position_embeddings=64, pad_token_id=0,
                       # 10x the usual init: attention far from uniform, so that masks matter
                       initializer_range=0.2, **overrides))
    torch.manual_seed(0)
    # Each model gets a config of its own: _from_config records the implementation in it.
    eager = transformers.AutoModelForCausalLM.from_config(copy.deepcopy(config),
                                                          attn_implementation="eager")
    ours = transformers.AutoModelForCausalLM.from_config(copy.deepcopy(config),
                                                         attn_implementation=NAME)
    with torch.no_grad():  # init puts the sinks at ~0; spread them so that they matter
        for name, parameter in eager.named_parameters():
            if name.endswith("sinks"):
                parameter.normal_(0.0, 1.0)
    ours.load_state_dict(eager.state_dict())
    return eager.float().eval(), ours.float().eval()


def _tokens(batch: int, length: int, seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(1, VOCAB, (batch, length), generator=generator)


@pytest.fixture
def flashgen_calls(monkeypatch):
    """Counts flashgen.attention's calls, and turns a FallbackWarning into an error."""
    calls = []
    attention = fg_transformers.attention

    def counted(*args, **kwargs):
        calls.append(kwargs)
        return attention(*args, **kwargs)
    monkeypatch.setattr(fg_transformers, "attention", counted)
    with warnings.catch_warnings():
        warnings.simplefilter("error", fg_transformers.FallbackWarning)
        yield calls


def _close(ours, theirs, tolerance):
    """max |ours - theirs| within tolerance times max |theirs|."""
    scale = theirs.abs().max().item()
    difference = (ours - theirs).abs().max().item()
    assert difference <= tolerance * scale, f"max |diff| {difference}, max |reference| {scale}"


@pytest.mark.parametrize("model_name", CONFIGS)
def test_prefill_logits_match_eager(model_name, flashgen_calls):
    eager, ours = _pair(model_name)
    tokens = _tokens(2, 13)  # longer than the sliding window of 5
    with torch.no_grad():
        expected = eager(tokens).logits
        got = ours(tokens).logits
    _close(got, expected, 1e-5)
    assert len(flashgen_calls) == 2  # every layer on flashgen
    if model_name != "llama":
        assert any(call["window_size"] == (4, -1) for call in flashgen_calls)


@pytest.mark.parametrize("model_name", CONFIGS)
@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_generate_with_kv_cache_matches_eager(model_name, cache, flashgen_calls):
    eager, ours = _pair(model_name)
    tokens = _tokens(2, 9, seed=2)
    options = dict(attention_mask=torch.ones_like(tokens), max_new_tokens=6, do_sample=False,
                   return_dict_in_generate=True, output_scores=True)
    if cache == "static":
        options["cache_implementation"] = "static"
    with torch.no_grad():
        expected = eager.generate(tokens, **options)
        got = ours.generate(tokens, **options)
    assert torch.equal(got.sequences, expected.sequences)
    for got_scores, expected_scores in zip(got.scores, expected.scores):
        _close(got_scores, expected_scores, 1e-5)
    # The decode steps (one query against the cache) ran on flashgen too.
    assert len(flashgen_calls) == 2 * 6


@pytest.mark.parametrize("model_name", CONFIGS)
def test_gradients_match_eager(model_name, flashgen_calls):
    eager, ours = _pair(model_name)
    tokens = _tokens(2, 11, seed=3)
    for model in (eager, ours):
        model.train()
        model(tokens, labels=tokens).loss.backward()
    ours_parameters = dict(ours.named_parameters())
    checked = 0
    for name, parameter in eager.named_parameters():
        if parameter.grad is None:  # experts no token was routed to
            assert ours_parameters[name].grad is None, name
            continue
        _close(ours_parameters[name].grad, parameter.grad, 5e-5)
        checked += 1
    assert checked > 0 and flashgen_calls
    if model_name == "gpt_oss":
        assert ours.model.layers[0].self_attn.sinks.grad.abs().max() > 0


@pytest.mark.parametrize("model_name", CONFIGS)
def test_padded_batch_runs_through_a_mask_expression(model_name, flashgen_calls):
    """The padding mask reaches the kernels as a mask expression: no
    fallback (the fixture makes one an error)."""
    eager, ours = _pair(model_name)
    tokens = _tokens(2, 10, seed=4)
    mask = torch.ones_like(tokens)
    mask[1, :3] = 0  # left padding, as generate() pads a batch
    with torch.no_grad():
        expected = eager(tokens, attention_mask=mask).logits
        got = ours(tokens, attention_mask=mask).logits
    attended = mask.bool()
    _close(got[attended], expected[attended], 1e-5)  # padded positions are not compared
    assert any(call.get("mask_mod") for call in flashgen_calls)
    options = dict(attention_mask=mask, max_new_tokens=5, do_sample=False)
    with torch.no_grad():
        assert torch.equal(ours.generate(tokens, **options), eager.generate(tokens, **options))


def test_a_masked_call_the_backend_refuses_runs_in_torch(monkeypatch):
    """A padded batch whose masked calls the backend refuses (as a CUDA
    build would refuse an option it lacks) runs in torch with a
    FallbackWarning, and still gives eager attention's answer."""
    eager, ours = _pair("llama")
    attention = fg_transformers.attention

    def refusing(*args, **kwargs):
        if kwargs.get("mask_mod"):
            raise fg_transformers.UnsupportedError("mask_mod: refused here")
        return attention(*args, **kwargs)
    monkeypatch.setattr(fg_transformers, "attention", refusing)
    tokens = _tokens(2, 10, seed=5)
    mask = torch.ones_like(tokens)
    mask[0, :4] = 0
    with torch.no_grad(), pytest.warns(fg_transformers.FallbackWarning):
        got = ours(tokens, attention_mask=mask).logits
    with torch.no_grad():
        expected = eager(tokens, attention_mask=mask).logits
    attended = mask.bool()
    _close(got[attended], expected[attended], 1e-5)


def test_no_mask_is_built_without_padding(monkeypatch, flashgen_calls):
    """Full attention with a dynamic cache needs no mask: none is built, and
    none is compared with the causal pattern, in prefill or decode."""
    compared = []
    monkeypatch.setattr(fg_transformers, "_keys_of_pattern",
                        lambda *args: compared.append(args))
    _, ours = _pair("llama")
    tokens = _tokens(2, 9, seed=5)
    with torch.no_grad():
        ours.generate(tokens, attention_mask=torch.ones_like(tokens), max_new_tokens=3,
                      do_sample=False)
    assert not compared and len(flashgen_calls) == 2 * 3


def test_chunk_after_a_cache_is_bottom_right(flashgen_calls):
    """Three new queries against a cache of seven keys: query i sees keys up to
    4 + i (bottom-right), as transformers' mask for a chunked prefill says."""
    generator = torch.Generator().manual_seed(6)
    query = torch.randn(1, 4, 3, 16, generator=generator)
    key, value = (torch.randn(1, 2, 7, 16, generator=generator) for _ in range(2))
    module = torch.nn.Module()
    module.is_causal = True
    output, weights = fg_transformers.attention_forward(module, query, key, value, None)
    assert weights is None and output.shape == (1, 3, 4, 16)
    causal = torch.arange(7)[None, :] <= torch.arange(3)[:, None] + 4
    expected = torch.nn.functional.scaled_dot_product_attention(query, key, value,
                                                                attn_mask=causal, enable_gqa=True)
    _close(output, expected.transpose(1, 2), 1e-6)
    # The same pattern given as transformers' additive mask, with two unfilled
    # static-cache slots after it: still flashgen, over the first seven keys.
    additive = torch.full((1, 1, 3, 9), torch.finfo(torch.float32).min)
    additive[..., :7].masked_fill_(causal, 0.0)
    padded_key, padded_value = (torch.cat([t, torch.zeros(1, 2, 2, 16)], dim=2)
                                for t in (key, value))
    masked, _ = fg_transformers.attention_forward(module, query, padded_key, padded_value,
                                                  additive)
    _close(masked, expected.transpose(1, 2), 1e-6)
    assert len(flashgen_calls) == 2


def test_dropout_is_refused():
    _, ours = _pair("llama", attention_dropout=0.1)
    ours.train()
    with pytest.raises(ValueError, match="dropout"):
        ours(_tokens(1, 5))


def test_register_refuses_a_name_transformers_takes_for_flash_attention():
    with pytest.raises(ValueError, match="flash"):
        fg_transformers.register("flashgen")
    assert fg_transformers.register() == NAME == "fgen"
