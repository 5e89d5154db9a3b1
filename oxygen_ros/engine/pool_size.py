"""What the KV pool must hold, checked before it is allocated: every robot's newest
observation prefix at once and, beside them, one request whole — its own frame's prefix (a
request preempted as a new frame came resumes on the frame it was asked about) and its
prompt and answer at their configured limits (the node refuses less, and so does inspect);
then the cache allocated, a size the machine cannot give named with its settings."""

from oxygen_ros.cache.kv_cache import KVCache


def prefix_tokens(model_config, cameras: int) -> int:
    """The longest observation prefix: every camera's image tokens and the longest prompt."""
    return cameras * model_config.image_tokens_per_camera + model_config.max_prompt_tokens


def check_pool(model_config, num_pages: int, page_size: int, cameras: int,
               robots: int = 1, request_tokens: int = 0) -> None:
    """ValueError unless num_pages pages hold `robots` longest prefixes and, beside them, a
    request's own longest prefix and its `request_tokens` (prompt and answer)."""
    tokens = prefix_tokens(model_config, cameras)
    needed = (robots + 1) * -(-tokens // page_size) + -(-request_tokens // page_size) + 1
    if needed > num_pages:
        raise ValueError(f"num_pages={num_pages} cannot hold {robots} robot(s)' newest "
                         f"observation prefix(es) of {tokens} tokens beside one request whole "
                         f"(its own frame's prefix, {request_tokens} prompt and answer "
                         f"tokens): {needed} pages of {page_size}; raise num_pages to {needed}")


def request_tokens(config) -> int:
    """The longest request of `config` (EngineConfig): prompt and answer at their limits."""
    return config.max_request_tokens + max(config.dialogue_max_tokens, config.memory_max_tokens)


def cache_bytes(model_config, num_pages: int, page_size: int, action_batch: int,
                element_bytes: int) -> int:
    """The KV cache's size: the paged pool and the action tier (action_horizon tokens per
    robot in one frame)."""
    tokens = num_pages * page_size + action_batch * model_config.action_horizon
    return tokens * model_config.kv_bytes_per_token(element_bytes)


def allocate_cache(model, config, action_batch: int = 1) -> KVCache:
    """The engine's KV cache for `model` (Pi05Model) and `config` (EngineConfig), with an
    action tier for `action_batch` robots, checked first (check_pool)."""
    model_config = model.config
    check_pool(model_config, config.num_pages, config.page_size, len(config.camera_names),
               max(1, action_batch), request_tokens(config))
    try:
        return KVCache.for_model(model_config, config.num_pages, config.page_size,
                                 action_batch, model.dtype, model.device)
    except RuntimeError as error:    # the allocator's: sizes from num_pages, config.json
        size = cache_bytes(model_config, config.num_pages, config.page_size, action_batch,
                           model.dtype.itemsize)
        raise ValueError(
            f"the KV cache ({size / 2**30:.2f} GiB: num_pages {config.num_pages} x "
            f"page_size {config.page_size} tokens, and action_horizon "
            f"{model_config.action_horizon} tokens for each of {action_batch} robot(s)) "
            f"cannot be allocated on {model.device}: {str(error).splitlines()[0]}") from None
