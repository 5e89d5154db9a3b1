"""FrameSynchronizer pairs cameras and joint states by stamp and accounts for every frame."""

from oxygen_ros.ros.frame_sync import FrameSynchronizer

MS = 1_000_000
CAMERAS = ["base", "left", "right"]


def make(**kwargs) -> FrameSynchronizer:
    return FrameSynchronizer(CAMERAS, slop_ns=kwargs.pop("slop", 10 * MS),
                             max_delay_ns=kwargs.pop("delay", 100 * MS), **kwargs)


def feed_tick(sync, t_ms, skew_ms=(0, 3, -4), state_skew_ms=1):
    """A frame of each camera around t_ms, and a joint state (none: state_skew_ms None)."""
    for camera, skew in zip(CAMERAS, skew_ms):
        sync.add_frame(camera, (t_ms + skew) * MS, f"{camera}@{t_ms}")
    if state_skew_ms is not None:
        sync.add_state((t_ms + state_skew_ms) * MS, f"state@{t_ms}")


def test_frames_within_slop_pair_with_the_closest_partner():
    sync = make()
    feed_tick(sync, 0)
    feed_tick(sync, 50)
    first, second = sync.pop(), sync.pop()
    assert first.frames == {"base": "base@0", "left": "left@0", "right": "right@0"}
    assert first.state == "state@0" and first.stamp_ns == 0
    assert second.frames["right"] == "right@50" and second.state == "state@50"
    assert sync.pop() is None
    assert sync.stats.published == 2 and sync.stats.missing == 0


def test_a_set_waits_for_a_camera_that_may_still_arrive():
    sync = make()
    sync.add_frame("base", 0, "base@0")
    sync.add_frame("left", 2 * MS, "left@0")
    sync.add_state(0, "state@0")
    assert sync.pop() is None  # right has not reported yet
    sync.add_frame("right", MS, "right@0")
    assert sync.pop().frames["right"] == "right@0"


def test_a_dead_camera_is_left_out_after_max_delay_and_counted_missing():
    sync = make()

    def tick(t):
        sync.add_frame("base", t * MS, f"base@{t}")
        sync.add_frame("left", t * MS, f"left@{t}")
        sync.add_state(t * MS, f"state@{t}")

    for t in (0, 50, 100):
        tick(t)
    assert sync.pop() is None  # the newest frame is only 100 ms ahead: right may still come
    tick(150)
    published = list(iter(sync.pop, None))
    assert [s.stamp_ns // MS for s in published] == [0]  # 150 ms behind the newest: give up
    assert set(published[0].frames) == {"base", "left"}
    assert sync.stats.missing == 1


def test_frames_without_a_joint_state_are_given_up_as_unpaired():
    sync = make()
    sync.add_state(500 * MS, "state@500")  # the only state is far newer than the frames
    feed_tick(sync, 0, state_skew_ms=600)
    assert sync.pop() is None
    assert sync.stats.unpaired == 1 and sync.stats.published == 0


def test_old_stamps_after_a_published_set_are_counted_late_and_never_published():
    sync = make()
    feed_tick(sync, 100)
    assert sync.pop().stamp_ns == 100 * MS
    sync.add_frame("base", 90 * MS, "base@90")
    assert sync.stats.late == 1
    assert sync.pop() is None


def test_full_buffers_drop_the_oldest_frame_and_count_it():
    sync = make(buffer_size=2)
    for t in (0, 50, 100):
        sync.add_frame("base", t * MS, f"base@{t}")
    assert sync.stats.dropped == 1


def test_a_frame_decoded_late_still_finds_the_1_khz_joint_state_of_its_instant():
    sync = make(state_horizon_ns=1000 * MS)
    for t in range(600):                          # 600 ms of a 1 kHz arm before the frame
        sync.add_state(t * MS, f"state@{t}")
    feed_tick(sync, 0, state_skew_ms=600)
    published = sync.pop()
    assert published.state == "state@0" and published.state_stamp_ns == 0
    assert sync.stats.unpaired == 0


def test_joint_states_are_kept_for_the_horizon_and_at_most_state_buffer_size():
    sync = make(state_horizon_ns=100 * MS, state_buffer_size=50)
    for t in range(0, 400, 2):                    # 500 Hz for 400 ms
        sync.add_state(t * MS, f"state@{t}")
    assert [s for s, _ in sync._states] == [t * MS for t in range(300, 400, 2)]
    sync.add_state(1000 * MS, "state@1000")       # after a pause: only it is in the horizon
    assert [s for s, _ in sync._states] == [1000 * MS]
    feed_tick(sync, 200, state_skew_ms=800)
    assert sync.pop() is None and sync.stats.unpaired == 1


def test_joint_states_out_of_order_pair_by_stamp():
    sync = make()
    for t in (30, 10, 20, 0):
        sync.add_state(t * MS, f"state@{t}")
    feed_tick(sync, 21, state_skew_ms=19)
    assert sync.pop().state == "state@20"


def test_a_frame_waits_for_the_joint_state_of_its_instant_and_pairs_when_it_comes():
    sync = make()
    sync.add_state(-20 * MS, "state@-20")
    feed_tick(sync, 0, state_skew_ms=None)
    assert sync.pop() is None and sync.stats.unpaired == 0
    sync.add_state(MS, "state@1")
    assert sync.pop().state == "state@1"


def test_a_joint_state_stamped_ahead_of_its_time_does_not_make_later_frames_miss():
    sync = make(state_horizon_ns=1000 * MS)
    for t in range(0, 1000, 10):
        sync.add_state(t * MS, f"state@{t}")
    sync.add_state(1500 * MS, "state@1500")      # a publisher's clock jumped ahead once
    sync.add_state(1000 * MS, "state@1000")
    feed_tick(sync, 1040, state_skew_ms=None)
    assert sync.pop() is None and sync.stats.unpaired == 0   # its state may still come
    sync.add_state(1040 * MS, "state@1040")
    assert sync.pop().state == "state@1040"
