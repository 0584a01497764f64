"""Every upstream name the worker extension relies on, as plain data (no import of vllm_omni).

Each entry is ``(file inside the wheel, kind, name)``; a contract test reads the 0.30.0 release
wheel and asserts that each one still exists, so an upgrade that renames one of them fails in CI
rather than silently writing no comparison point on the host. Kinds:

- ``module``: the file exists (``name`` repeats its dotted module path);
- ``class`` / ``function``: a top-level ``class NAME`` / ``def NAME`` in the file;
- ``method``: ``Class.method`` defined in that class's body (``def`` or ``@property``);
- ``parameter``: ``Class.method.param`` or ``function.param``: a parameter of that signature;
- ``instance_attribute``: ``Class.attr`` assigned as ``self.attr = ...`` inside that class;
- ``class_attribute``: ``Class.attr`` assigned in that class's body;
- ``field``: ``Class.attr``, an annotated field of a dataclass;
- ``key``: ``function.key``, a string key of the dict that function returns
  (``_prepare_encoder_conditioning_inputs`` returns the request context as a dict);
- ``call``: ``function:callee``, the function calls ``callee(...)`` itself, through
  ``nn.Module.__call__`` (so the forward hooks on that module fire), not ``callee.forward(...)``;
  ``callee`` is a dotted name (``model``, ``self.model.encoder``) or ``self.blocks[*]`` (the
  function loops over ``self.blocks`` and calls each item);
- ``sets``: ``function:param.attr``, the function assigns ``param.attr = ...`` on its parameter
  ``param`` (``pipeline._cache_dit_targets`` on the pipeline Cache-DiT is enabled on);
- ``module_path``: ``Class:path``, the module at ``path`` (attribute names, a list's items by
  index) inside an instance of that class, followed through the ``self.attr = ...`` assignments of
  the wheel's classes; where the module comes from code the wheel does not ship (H3's VAEs load
  theirs from the checkpoint), an attribute counts when the class's own code reaches it
  (``self.model.encoder``).

Third-party names (Cache-DiT, pinned by the wheel as ``cache-dit==1.5.0``) are listed apart in
:data:`CACHE_DIT_NAMES`, with paths inside the cache-dit wheel, which the contract test reads
the same way.
"""

from __future__ import annotations

from typing import Final, Literal

Kind = Literal[
    "module", "class", "function", "method", "parameter", "instance_attribute",
    "class_attribute", "field", "key", "call", "sets", "module_path",
]

WORKER = "vllm_omni/diffusion/worker/diffusion_worker.py"
RUNNER = "vllm_omni/diffusion/worker/diffusion_model_runner.py"
REQUEST = "vllm_omni/diffusion/request.py"
SAMPLING = "vllm_omni/inputs/data.py"
CONFIG = "vllm_omni/diffusion/data.py"
FORWARD_CONTEXT = "vllm_omni/diffusion/forward_context.py"
H3 = "vllm_omni/diffusion/models/minimax_h3/pipeline_minimax_h3.py"
H3_LOOP = "vllm_omni/diffusion/models/minimax_h3/denoise_loop.py"
TRANSFORMER = "vllm_omni/diffusion/models/minimax_h3/minimax_h3_transformer.py"
H3_ENCODER = "vllm_omni/diffusion/models/minimax_h3/encoder.py"
H3_VAE = "vllm_omni/diffusion/models/minimax_h3/vae.py"
CACHE_RUNTIME = "vllm_omni/diffusion/cache/cachedit/runtime.py"
CACHE_BACKEND = "vllm_omni/diffusion/cache/cachedit/backend.py"
ATTENTION = "vllm_omni/diffusion/attention/layer.py"
VIDEO_FORM = "vllm_omni/entrypoints/openai/video/generation/helpers.py"
CANCELLATION = "vllm_omni/diffusion/cancellation.py"
PLATFORM = "vllm_omni/platforms/interface.py"
ENGINE = "vllm_omni/diffusion/diffusion_engine.py"
ERRORS = "vllm_omni/errors.py"

# Attribute set on the pipeline by CacheDiTBackend.enable: the modules Cache-DiT hooks (read by
# engine.vllm_omni.enabled_path; its `sets` entry below holds it to the wheel).
CACHE_DIT_TARGETS_ATTRIBUTE: Final = "_cache_dit_targets"
# The module capture's roots for the encoder stage (engine.vllm_omni.watch), as paths from the
# pipeline: the modules H3's code calls into. H3 bypasses the text encoder's own forward (it calls
# encode_ids, which calls `vision` and `text_model`), and its VAEs encode through methods of
# `model` (the checkpoint's module, registered twice, as `remote.model` and `model`), which call
# its children (`self.model.encoder(...)`): a hook on `text_encoder`, `video_vae`, `audio_vae` or
# their direct children never fires.
ENCODER_ROOTS: Final = ("text_encoder.vision", "text_encoder.text_model", "video_vae.model",
                        "audio_vae.model")
# What a block-level encoders capture names on the real H3 (its roots' children that the encode
# calls), each followed in the wheel from MiniMaxH3Pipeline.
ENCODER_BLOCKS: Final = (
    "text_encoder.vision.blocks.0", "text_encoder.text_model.embed_tokens",
    "text_encoder.text_model.layers.0", "video_vae.model.encoder", "video_vae.model.quant_conv",
    "audio_vae.model.encoder", "audio_vae.model.pre_block", "audio_vae.model.mean_proj",
)

UPSTREAM_NAMES: Final[tuple[tuple[str, Kind, str], ...]] = (
    # How the extension is mixed in: type(name, (extension, worker), {}) -- our execute_model
    # runs first and delegates to DiffusionWorker.execute_model through super().
    (WORKER, "class", "WorkerWrapperBase"),
    (WORKER, "method", "WorkerWrapperBase._prepare_worker_class"),
    (WORKER, "class", "DiffusionWorker"),
    (WORKER, "method", "DiffusionWorker.execute_model"),
    (WORKER, "parameter", "DiffusionWorker.execute_model.req"),
    (WORKER, "parameter", "DiffusionWorker.execute_model.od_config"),
    # Refused for diagnostics (they would bypass execute_model and write nothing).
    (WORKER, "method", "DiffusionWorker.execute_model_batch"),
    (WORKER, "method", "DiffusionWorker.execute_stepwise"),
    (WORKER, "instance_attribute", "DiffusionWorker.rank"),
    (WORKER, "instance_attribute", "DiffusionWorker.model_runner"),
    (WORKER, "instance_attribute", "DiffusionWorker.od_config"),
    # The runner owns the pipeline and any non-pipeline cache backend.
    (RUNNER, "class", "DiffusionModelRunner"),
    (RUNNER, "instance_attribute", "DiffusionModelRunner.pipeline"),
    (RUNNER, "instance_attribute", "DiffusionModelRunner.cache_backend"),
    (RUNNER, "instance_attribute", "DiffusionModelRunner.prompt_embed_cache"),
    # The request and its per-request fields.
    (REQUEST, "class", "OmniDiffusionRequest"),
    (REQUEST, "field", "OmniDiffusionRequest.request_id"),
    (REQUEST, "field", "OmniDiffusionRequest.sampling_params"),
    (REQUEST, "method", "OmniDiffusionRequest.is_dummy_run"),
    (SAMPLING, "class", "OmniDiffusionSamplingParams"),
    (SAMPLING, "field", "OmniDiffusionSamplingParams.extra_args"),
    (SAMPLING, "field", "OmniDiffusionSamplingParams.quality"),
    (SAMPLING, "field", "OmniDiffusionSamplingParams.num_inference_steps"),
    # extra_params (multipart form, JSON) -> VideoGenerationRequest.extra_params ->
    # gen_params.extra_args.update(request.extra_params) -> sampling_params.extra_args.
    (VIDEO_FORM, "function", "_parse_video_form"),
    (VIDEO_FORM, "parameter", "_parse_video_form.extra_params"),
    # What ran, read from the server's configuration.
    (CONFIG, "class", "OmniDiffusionConfig"),
    (CONFIG, "field", "OmniDiffusionConfig.dtype"),
    (CONFIG, "field", "OmniDiffusionConfig.cache_backend"),
    (CONFIG, "field", "OmniDiffusionConfig.diffusion_kv_cache_dtype"),
    (CONFIG, "field", "OmniDiffusionConfig.quantization_config"),
    (CONFIG, "field", "OmniDiffusionConfig.diffusion_offload_config"),
    (CONFIG, "field", "OmniDiffusionConfig.enable_cpu_offload"),
    (CONFIG, "field", "OmniDiffusionConfig.enable_layerwise_offload"),
    (CONFIG, "field", "OmniDiffusionConfig.enable_distributed_layerwise_offload"),
    (CONFIG, "field", "OmniDiffusionConfig.enforce_eager"),
    (CONFIG, "field", "OmniDiffusionConfig.fa_deterministic"),
    # The text encoder's tensor-parallel size (the bring-up's tp_and_memory_policy row).
    (CONFIG, "field", "OmniDiffusionConfig.parallel_config"),
    (CONFIG, "field", "DiffusionParallelConfig.text_encoder_tp_size"),
    # The DiT step index, published by H3's denoise loop before each forward.
    (FORWARD_CONTEXT, "function", "get_forward_context"),
    (FORWARD_CONTEXT, "function", "is_forward_context_available"),
    (FORWARD_CONTEXT, "field", "ForwardContext.denoise_step_idx"),
    (H3_LOOP, "function", "minimax_h3_publish_denoise_progress"),
    # The DiT is called through nn.Module.__call__, each block too, so the dump's hook on the DiT
    # and a capture's hooks on its blocks fire (a `.forward(...)` call would skip them).
    (H3_LOOP, "call", "minimax_h3_denoise_loop:model"),
    (TRANSFORMER, "call", "MiniMaxH3DiTModel.forward:self.blocks[*]"),
    (TRANSFORMER, "call", "MiniMaxH3TokenRefiner.forward:self.blocks[*]"),
    # The H3 pipeline's stages, wrapped on the instance for one request.
    (H3, "class", "MiniMaxH3Pipeline"),
    (H3, "method", "MiniMaxH3Pipeline.forward"),
    (H3, "method", "MiniMaxH3Pipeline._prepare_encoder_conditioning_inputs"),
    (H3, "key", "_prepare_encoder_conditioning_inputs.text_embeddings"),
    (H3, "key", "_prepare_encoder_conditioning_inputs.visual_condition"),
    (H3, "key", "_prepare_encoder_conditioning_inputs.audio_condition"),
    (H3, "method", "MiniMaxH3Pipeline.diffuse"),
    (H3, "method", "MiniMaxH3Pipeline.decode"),
    (H3, "method", "MiniMaxH3Pipeline.decode_to_mp4"),
    (H3, "method", "MiniMaxH3Pipeline._is_output_owner_rank"),
    (H3, "method", "MiniMaxH3Pipeline.is_cache_dit_enabled"),
    (H3, "class_attribute", "MiniMaxH3Pipeline._dit_modules"),
    (H3, "instance_attribute", "MiniMaxH3Pipeline.transformer"),
    (H3, "instance_attribute", "MiniMaxH3Pipeline.transformers_ref"),
    (H3, "instance_attribute", "MiniMaxH3Pipeline._cache_dit_runtime"),
    # The encoder stage: its roots and the blocks a capture names (ENCODER_ROOTS, ENCODER_BLOCKS,
    # followed from the pipeline), and the calls that run them.
    *((H3, "module_path", f"MiniMaxH3Pipeline:{path}") for path in ENCODER_ROOTS + ENCODER_BLOCKS),
    (H3_ENCODER, "call", "MiniMaxH3Qwen3VLEncoder._encode:self.vision"),
    (H3_ENCODER, "call", "MiniMaxH3Qwen3VLEncoder._encode:self.text_model.embed_tokens"),
    (H3_ENCODER, "call", "MiniMaxH3Qwen3VLEncoder._encode:self.text_model"),
    (H3_ENCODER, "call", "MiniMaxH3Qwen3VLVisionModel.forward:self.blocks[*]"),
    (H3_ENCODER, "call", "MiniMaxH3Qwen3VLTextModel.forward:self.layers[*]"),
    (H3_VAE, "call", "MiniMaxH3VideoVAE.encode_image:self.model.encode_images"),
    (H3_VAE, "call", "MiniMaxH3VideoVAE.encode_video:self.model.encode_videos"),
    (H3_VAE, "call", "MiniMaxH3AudioVAE.encode_waveform:self.model.encoder"),
    (H3_VAE, "call", "MiniMaxH3AudioVAE.encode_waveform:self.model.pre_block"),
    (H3_VAE, "call", "MiniMaxH3AudioVAE.encode_waveform:self.model.mean_proj"),
    # The DiT's module names, as a capture names them (transformer.blocks.7.mlp.fc2) and as the
    # fake upstream mirrors them (tests/engine/test_vllm_omni_capture.py holds the fake to these).
    (TRANSFORMER, "class", "MiniMaxH3DiTModel"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3DiTModel.video_patch_proj"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3DiTModel.audio_patch_proj"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3DiTModel.condition_proj"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3DiTModel.time_embedder"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3DiTModel.token_refiner"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3DiTModel.blocks"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3DiTModel.final_layer"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3TimeEmbedder.proj_in"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3TimeEmbedder.proj_out"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3TokenRefiner.blocks"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3TokenRefinerBlock.attn"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3TokenRefinerBlock.mlp"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3DiTBlock.attn"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3DiTBlock.mlp"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3DiTBlock.adaln_proj"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3Attention.qkv_proj"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3Attention.out_proj"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3Attention.attention"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3MLP.fc1"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3MLP.fc2"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3AdalnProj.linear"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3FinalLayer.adaln_proj"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3FinalLayer.video_out"),
    (TRANSFORMER, "instance_attribute", "MiniMaxH3FinalLayer.audio_out"),
    # Cache-DiT's per-request state.
    (CACHE_RUNTIME, "class", "RequestScopedCacheDiTRuntime"),
    (CACHE_RUNTIME, "method", "RequestScopedCacheDiTRuntime.is_enabled"),
    (CACHE_RUNTIME, "instance_attribute", "RequestScopedCacheDiTRuntime._installation_key"),
    # The modules Cache-DiT caches, which enabled_path reads from the pipeline: the request's
    # runtime enables the backend on the pipeline, which sets CACHE_DIT_TARGETS_ATTRIBUTE there.
    (CACHE_RUNTIME, "call", "RequestScopedCacheDiTRuntime.prepare:backend.enable"),
    (CACHE_BACKEND, "sets", f"CacheDiTBackend.enable:pipeline.{CACHE_DIT_TARGETS_ATTRIBUTE}"),
    # A capture that stops once it is whole (engine.vllm_omni.stop): H3 stops a cancelled request
    # at a step boundary by raising DiffusionRequestAbortedError (after draining the device),
    # which the runner answers as aborted; the stop raises the same error from the DiT's
    # pre-hook, synchronizes first, and answers a DiffusionOutput error with a 4xx status, which
    # the engine's postprocess_output turns into a client error carried to the HTTP answer.
    (H3, "class_attribute", "MiniMaxH3Pipeline.supports_request_cancellation"),
    (CANCELLATION, "function", "check_request_cancellation"),
    (CONFIG, "class", "DiffusionRequestAbortedError"),
    (CONFIG, "class", "DiffusionOutput"),
    (CONFIG, "field", "DiffusionOutput.error"),
    (CONFIG, "field", "DiffusionOutput.error_status_code"),
    (CONFIG, "field", "DiffusionOutput.error_type"),
    (CONFIG, "field", "DiffusionOutput.aborted"),
    (PLATFORM, "method", "OmniPlatform.synchronize"),
    (ENGINE, "method", "DiffusionEngine.postprocess_output"),
    (ERRORS, "function", "is_client_error_status"),
    (ERRORS, "function", "client_error_from_metadata"),
    # Attention backend per layer.
    (ATTENTION, "class", "Attention"),
    (ATTENTION, "instance_attribute", "Attention.attn_backend"),
    (ATTENTION, "instance_attribute", "Attention.attention"),
)

# cache_dit.summary(module, details=..., logging=...) -> list[CacheStats]; each CacheStats has
# cached_steps and accumulated_cached_steps (cache_dit/summary.py in cache-dit 1.5.0).
CACHE_DIT_NAMES: Final[tuple[tuple[str, Kind, str], ...]] = (
    ("cache_dit/summary.py", "function", "summary"),
    ("cache_dit/summary.py", "parameter", "summary.details"),
    ("cache_dit/summary.py", "parameter", "summary.logging"),
    ("cache_dit/summary.py", "class", "CacheStats"),
    ("cache_dit/summary.py", "field", "CacheStats.cached_steps"),
    ("cache_dit/summary.py", "field", "CacheStats.accumulated_cached_steps"),
)
