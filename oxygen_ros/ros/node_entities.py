"""destroy_entities: hand a node's publishers, subscriptions and timers back to rclpy."""


def destroy_entities(node, entities) -> None:
    """Destroy each entity with the node's own destroy_* (the node forgets it too), then
    empty the list."""
    for entity in entities:
        destroy = {"Publisher": node.destroy_publisher,
                   "Subscription": node.destroy_subscription,
                   "Timer": node.destroy_timer}.get(type(entity).__name__)
        if destroy is not None:
            destroy(entity)
    entities.clear()
