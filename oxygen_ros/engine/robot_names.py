"""The robot names an engine serves, checked: what a fleet's `robots` list may hold (light:
the launch files check it without loading the model)."""


def robot_names(robots) -> list[str]:
    """The robot list, checked: names unique, each empty (the only robot) or a ROS name
    segment (letters, digits, underscores; not starting with a digit)."""
    names = list(robots)
    if not names:
        raise ValueError("an engine serves at least one robot")
    if len(set(names)) != len(names):
        twice = sorted({name for name in names if names.count(name) > 1})
        raise ValueError(f"robots named twice: {twice}")
    for name in names:
        if name == "" and len(names) == 1:
            continue
        if not (name and (name[0].isalpha() or name[0] == "_")
                and all(c.isalnum() or c == "_" for c in name) and name.isascii()):
            raise ValueError(f"robot name {name!r}: use letters, digits and underscores, "
                             "not starting with a digit")
    return names
