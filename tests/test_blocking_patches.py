"""The patched blocking calls keep their semantics: results, timeouts and notifications."""

import queue
import threading
import time

import pytest

from pytest_scalene.sampling.blocking_patches import BlockingPatches


@pytest.fixture
def patched():
    patches = BlockingPatches()
    originals = (threading.Thread.join, threading.Condition.wait, time.sleep)
    patches.apply()
    yield
    patches.undo()
    assert (threading.Thread.join, threading.Condition.wait, time.sleep) == originals


def test_join_waits_for_the_thread(patched):
    done = []
    worker = threading.Thread(target=lambda: (time.sleep(0.05), done.append(1)))
    worker.start()
    worker.join()
    assert done == [1] and not worker.is_alive()


def test_join_timeout_is_kept(patched):
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    begin = time.monotonic()
    worker.join(timeout=0.1)
    assert worker.is_alive()
    assert 0.09 <= time.monotonic() - begin < 1.0
    stop.set()
    worker.join()


def test_condition_notify_is_never_lost(patched):
    items: queue.Queue[int] = queue.Queue()
    consumer_got = []
    consumer = threading.Thread(target=lambda: consumer_got.extend(items.get() for _ in range(200)))
    consumer.start()
    for i in range(200):
        items.put(i)
    consumer.join(timeout=10)
    assert consumer_got == list(range(200))


def test_event_wait_timeout_returns_false(patched):
    assert threading.Event().wait(0.05) is False


def test_sleep_lasts_as_long(patched):
    begin = time.monotonic()
    time.sleep(0.12)
    assert 0.12 <= time.monotonic() - begin < 1.0


@pytest.mark.parametrize("timeout", [0, -0.5, -1])
def test_a_timeout_of_zero_or_less_does_not_block(patched, timeout):
    # As unpatched: join(max(timeout, 0)) and a non-blocking Condition.wait. Code that computes
    # `deadline - now` passes a negative timeout when the machine is slow; waiting forever on it
    # hung a profiled test suite. The release after 3 s only keeps a regression from hanging.
    release = threading.Event()
    worker = threading.Thread(target=release.wait)
    worker.start()
    threading.Timer(3.0, release.set).start()
    begin = time.monotonic()
    assert release.wait(timeout) is False
    worker.join(timeout)
    assert worker.is_alive()
    assert time.monotonic() - begin < 1.0
    release.set()
    worker.join()
