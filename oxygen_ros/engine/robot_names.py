"""The robot names an engine serves, checked: what a fleet's `robots` list may hold (light:
the launch files check it without loading the model)."""


def robot_names(robots, unnamed: bool = True) -> list[str]:
    """The robot list, checked: names unique, each a name that can prefix the robot's node
    names and namespace its topics (letters, digits and single underscores, starting with a
    letter, not ending with an underscore: ROS reads `__` as the start of a special rule).
    With unnamed, the list [''] is the one robot without a namespace."""
    names = list(robots)
    if not names:
        raise ValueError("an engine serves at least one robot")
    if len(set(names)) != len(names):
        twice = sorted({name for name in names if names.count(name) > 1})
        raise ValueError(f"robots named twice: {twice}")
    if unnamed and names == [""]:
        return names
    for name in names:
        if not isinstance(name, str) or name == "":
            raise ValueError(f"robot name {name!r}: give each robot a name (one robot "
                             "without a namespace: no robots list at all)")
        if not (name.isascii() and name[0].isalpha() and "__" not in name
                and not name.endswith("_") and all(c.isalnum() or c == "_" for c in name)):
            raise ValueError(f"robot name {name!r}: use letters, digits and single "
                             "underscores, starting with a letter and not ending with an "
                             "underscore")
    return names
