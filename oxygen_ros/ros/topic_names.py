"""rcl's topic name rules without ROS, so that the checks before start refuse the topic
parameters rcl would refuse when the node creates its publishers and subscriptions
(test_topic_names holds this to rclpy's own validators)."""

SUBSTITUTIONS = ("{node}", "{ns}", "{namespace}")   # what rcl_expand_topic_name knows
LONGEST = 255 - 8       # rmw's limit on an expanded name (DDS adds a prefix)
ACTION_SUFFIX = "/_action/cancel_goal"    # the longest name rcl_action makes of an action's


def topic_name_problem(name: str, node: str = "", longest: int = LONGEST) -> str:
    """A ROS topic name (rcl's rules; {node}, {ns} and {namespace} substitute): what rcl
    would say is wrong with `name`, with the character it points at, or '' if nothing.
    `node`: the full name of the node that uses it ('/alpha/inference'), which decides what
    the name expands to ('{ns}/x' is '//x' in the root namespace); without it such a name
    passes, and the check before start (config_check) asks again with the node. `longest`:
    the most characters the expanded name may have."""
    problem, index = _problem(name, longest)
    if not problem and node:
        problem, index = _expanded_problem(name, node, longest)
    if not problem:
        return ""
    return f"{problem} (character {index + 1})" if name and index >= 0 else problem


def action_name_problem(name: str, node: str = "") -> str:
    """A ROS action name: a topic name that leaves room for rcl_action's longest suffix."""
    return topic_name_problem(name, node, LONGEST - len(ACTION_SUFFIX))


def expand(name: str, node: str) -> str:
    """`name` as rcl_expand_topic_name expands it for the node named `node` ('/alpha/x')."""
    namespace, _, base = node.rpartition("/")
    namespace = namespace or "/"
    if name.startswith("~"):
        name = node + name[1:]
    for substitution, value in (("{node}", base), ("{ns}", namespace),
                                ("{namespace}", namespace)):
        name = name.replace(substitution, value)
    if not name.startswith("/"):
        name = ("/" if namespace == "/" else namespace + "/") + name
    return name


def _problem(name: str, longest: int) -> tuple[str, int]:
    """rcl_validate_topic_name's finding and index (its checks in its order), then what
    expanding the name would find."""
    if not name:
        return "topic name must not be empty string", 0
    if _digit(name[0]):
        return _TOKEN_NUMBER, 0
    if name[-1] == "/":
        return "topic name must not end with a forward slash", len(name) - 1
    opened = None
    for i, char in enumerate(name):
        if char.isascii() and char.isalnum():
            if opened is not None and _digit(char) and i == opened + 1:
                return "substitution name must not start with a number", i
        elif char == "_":
            continue
        elif char == "/":
            if opened is not None:
                return _SUBSTITUTION_CHARACTERS, i
        elif char == "~":
            if i != 0:
                return "topic name must not have tilde '~' unless it is the first character", i
        elif char == "{":
            if opened is not None:
                return _SUBSTITUTION_CHARACTERS, i
            opened = i
        elif char == "}":
            if opened is None:
                return _UNMATCHED, i
            opened = None
        elif opened is not None:
            return _SUBSTITUTION_CHARACTERS, i
        else:
            return ("topic name must not contain characters other than alphanumerics, '_', "
                    "'~', '{', or '}'"), i
    if opened is not None:
        return _UNMATCHED, opened
    for i in range(len(name) - 1):      # (rcl looks at no pair ending on the last character)
        if name[i] == "/":
            if _digit(name[i + 1]):
                return _TOKEN_NUMBER, i + 1
        elif i == 1 and name[0] == "~":
            return ("topic name must not have a tilde '~' that is not followed by a forward "
                    "slash '/'"), 1
    start = 0
    while (start := name.find("{", start)) >= 0:
        end = name.index("}", start) + 1
        if name[start:end] not in SUBSTITUTIONS:
            return f"unknown substitution {name[start:end]}", start
        start = end
    if "//" in name:
        return "topic name must not contain repeated '/'", name.index("//")
    for substitution in ("/{ns}", "/{namespace}"):   # a namespace expands to '/...'
        if substitution in name:
            return ("topic name must not contain repeated '/' (a namespace begins with one)",
                    name.index(substitution))
    # a name with no substitution is at least this long expanded (relative: '/' before it)
    if "{" not in name and len(name) + (name[0] not in "/~") > longest:
        return f"topic length should not exceed {longest} characters expanded", -1
    return "", 0


def _expanded_problem(name: str, node: str, longest: int) -> tuple[str, int]:
    """What rmw_validate_full_topic_name finds in the expanded name (no index: the message
    names the expanded name)."""
    expanded = expand(name, node)
    said = f" ({name} expands to {expanded})"
    if expanded.endswith("/"):
        return "topic name must not end with a '/'" + said, -1
    if "//" in expanded:
        return "topic name must not contain repeated '/'" + said, -1
    if any(_digit(token[:1]) for token in expanded.split("/")):
        return "topic name must not have a token that starts with a number" + said, -1
    if len(expanded) > longest:
        return (f"topic length should not exceed {longest} characters ({name} expands to "
                f"{len(expanded)})"), -1
    return "", 0


def _digit(char: str) -> bool:
    return "0" <= char <= "9"


_TOKEN_NUMBER = "topic name token must not start with a number"
_UNMATCHED = "topic name must not have unmatched (unbalanced) curly braces '{}'"
_SUBSTITUTION_CHARACTERS = ("substitution name must not contain characters other than "
                            "alphanumerics or '_'")
