"""Joint states published in parts become one state; a part that stops is left out."""

from oxygen_ros.ros.joint_state_merger import MAX_JOINTS, JointStateMerger

MS = 1_000_000


def test_parts_from_two_drivers_merge_into_one_state():
    merger = JointStateMerger(max_age_ns=1000 * MS)
    assert merger.merge(0, ["a", "b"], [1.0, 2.0]) == (["a", "b"], [1.0, 2.0])
    names, positions = merger.merge(5 * MS, ["gripper"], [0.5])
    assert dict(zip(names, positions)) == {"a": 1.0, "b": 2.0, "gripper": 0.5}
    # one layout, the order the names were first seen, whichever part came last
    assert merger.merge(10 * MS, ["b", "a"], [2.5, 1.5]) == (["a", "b", "gripper"],
                                                              [1.5, 2.5, 0.5])
    assert merger.merge(15 * MS, ["gripper"], [0.6]) == (["a", "b", "gripper"],
                                                         [1.5, 2.5, 0.6])


def test_a_part_older_than_max_age_is_left_out():
    merger = JointStateMerger(max_age_ns=100 * MS)
    merger.merge(0, ["gripper"], [0.5])
    names, _ = merger.merge(100 * MS, ["a"], [1.0])
    assert set(names) == {"a", "gripper"}                    # exactly max_age_ns old: kept
    names, positions = merger.merge(101 * MS, ["a"], [1.1])
    assert (names, positions) == (["a"], [1.1])              # the gripper driver stopped


def test_a_late_message_keeps_its_own_positions_and_does_not_overwrite_newer_ones():
    merger = JointStateMerger(max_age_ns=1000 * MS)
    merger.merge(50 * MS, ["a"], [5.0])
    names, positions = merger.merge(40 * MS, ["a", "b"], [4.0, 2.0])
    assert dict(zip(names, positions)) == {"a": 4.0, "b": 2.0}
    names, positions = merger.merge(60 * MS, ["b"], [2.1])
    assert dict(zip(names, positions)) == {"a": 5.0, "b": 2.1}


def test_a_publisher_of_ever_new_names_cannot_grow_it():
    merger = JointStateMerger(max_age_ns=10**12)
    for i in range(3 * MAX_JOINTS):
        names, _ = merger.merge(i, [f"j{i}"], [0.0])
    assert len(names) == MAX_JOINTS and names[-1] == f"j{3 * MAX_JOINTS - 1}"
