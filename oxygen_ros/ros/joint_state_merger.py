"""JointStateMerger: one robot state from joint states published in parts (no ROS imports).

Robots often publish their joints on one topic in several messages (an arm driver and a
gripper driver, each its own). Each message is merged with the newest position of every
joint other messages gave, while that position is at most `max_age_ns` older than the
message: a driver that stops is left out after that long, and inference then refuses the
state (it lacks a configured joint) instead of reading a stale or zero position.
"""

from collections import OrderedDict

MAX_JOINTS = 1024   # names kept at most (a publisher of ever-new names cannot grow it)


class JointStateMerger:
    def __init__(self, max_age_ns: int):
        self.max_age_ns = max_age_ns
        self._latest: OrderedDict[str, tuple[int, float]] = OrderedDict()  # oldest first
        self._order: dict[str, None] = {}       # names in the order first seen

    def merge(self, stamp_ns: int, names, positions) -> tuple[list[str], list[float]]:
        """This message's joints and every other joint's newest position within max_age_ns
        before its stamp (the message's own positions win), in the order the names were
        first seen: one layout, whichever part came last."""
        latest = self._latest
        for name, position in zip(names, positions):
            if name not in latest or latest[name][0] <= stamp_ns:
                latest[name] = (stamp_ns, position)
                latest.move_to_end(name)
                self._order.setdefault(name)
        while latest and (len(latest) > MAX_JOINTS
                          or next(iter(latest.values()))[0] < stamp_ns - self.max_age_ns):
            del self._order[latest.popitem(last=False)[0]]
        merged = {name: position for name, (stamp, position) in latest.items()
                  if stamp >= stamp_ns - self.max_age_ns}
        merged.update(zip(names, positions))
        ordered = [name for name in self._order if name in merged]
        ordered += [name for name in merged if name not in self._order]   # a late part's
        return ordered, [merged[name] for name in ordered]
