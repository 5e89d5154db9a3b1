"""Questions about a TabletopWorld and their true answers at any time, and the true memory
line for a window of time: the ground truth the demo model is trained on and judged by."""

from oxygen_ros.demo.world import COLORS, HELD_S, PHASES, TabletopWorld

NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four"}
PLACES = ("on the left", "on the right", "at the front", "at the back", "in the gripper",
          "in the bin")
# when the demo asks (seconds into the episode), and which of the world's questions
DEMO_QUESTIONS = ((1.5, "what do you see?"), (3.5, "what are you doing?"),
                  (5.0, "where is the {target}?"), (6.5, "how many objects are there?"),
                  (8.0, "what are you doing?"), (10.5, "are you done?"))


def _listing(names: list[str]) -> str:
    names = [f"a {name}" for name in names]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def place(world: TabletopWorld, index: int, t: float) -> str:
    """in the gripper, in the bin, or on the left / right / at the front / back."""
    x, y, _, where = world.where(index, t)
    if where != "table":
        return f"in the {where}"
    if abs(x) >= abs(y):
        return "on the left" if x < 0 else "on the right"
    return "at the back" if y < 0 else "at the front"


def doing(world: TabletopWorld, t: float) -> str:
    target = world.things[world.target].name
    return {"reaching": f"reaching for the {target}", "grasping": f"picking up the {target}",
            "carrying": f"carrying the {target} to the bin",
            "releasing": f"putting the {target} in the bin", "returning": "moving back",
            "done": "nothing, the task is done"}[world.phase(t)]


def questions(world: TabletopWorld, t: float) -> list[tuple[str, str]]:
    """Every templated question that has an answer at time t, with that answer."""
    order = list(COLORS)
    ordered = sorted(range(len(world.things)), key=lambda i: order.index(world.things[i].color))
    out = [("what do you see?", _listing([world.things[i].name for i in ordered])),
           ("what are you doing?", doing(world, t)),
           ("are you done?", "yes" if world.phase(t) == "done" else "no"),
           ("how many objects are there?", NUMBERS[len(world.things)])]
    for index in ordered:
        out.append((f"where is the {world.things[index].name}?", place(world, index, t)))
    shapes = [thing.shape for thing in world.things]
    for thing in world.things:
        if shapes.count(thing.shape) == 1:
            out.append((f"what colour is the {thing.shape}?", thing.color))
    return out


def memory_line(world: TabletopWorld, start: float, end: float) -> str:
    """What happened between start and end (the events whose moment falls inside)."""
    target = world.things[world.target].name
    events = {PHASES[0][1]: f"reached the {target}", HELD_S: f"picked up the {target}",
              PHASES[3][1]: f"put the {target} in the bin"}
    happened = [text for moment, text in sorted(events.items()) if start < moment <= end]
    return ", then ".join(happened) if happened else doing(world, end)


def demo_dialogue(world: TabletopWorld) -> list[tuple[float, str]]:
    """The demo's questions about this world: (seconds into the episode, question)."""
    target = world.things[world.target].name
    return [(t, question.format(target=target)) for t, question in DEMO_QUESTIONS]
