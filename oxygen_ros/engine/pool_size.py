"""What the KV pool must hold, checked before it is allocated: every robot's newest
observation prefix at once and a page beside (the node refuses less, and so does inspect)."""


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
