"""What the KV pool must hold, checked before it is allocated: every robot's newest
observation prefix at once and a page beside (the node refuses less, and so does inspect);
then the cache allocated, a size the machine cannot give named with its settings."""

from oxygen_ros.cache.kv_cache import KVCache


def prefix_tokens(model_config, cameras: int) -> int:
    """The longest observation prefix: every camera's image tokens and the longest prompt."""
    return cameras * model_config.image_tokens_per_camera + model_config.max_prompt_tokens


def check_pool(model_config, num_pages: int, page_size: int, cameras: int,
               prefixes: int = 1) -> None:
    """ValueError unless num_pages pages hold `prefixes` longest prefixes and one page more."""
    tokens = prefix_tokens(model_config, cameras)
    needed = prefixes * -(-tokens // page_size) + 1
    if needed > num_pages:
        raise ValueError(f"num_pages={num_pages} cannot hold {prefixes} observation "
                         f"prefix(es) of {tokens} tokens ({needed} pages of {page_size}); "
                         "raise num_pages")


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
    # every robot's newest prefix is held at once
    check_pool(model_config, config.num_pages, config.page_size, len(config.camera_names),
               max(1, action_batch))
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
