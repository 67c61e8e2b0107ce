import threading

from cleaning import dedupe, dedupe_by


def test_order_kept():
    assert dedupe([3, 1, 3, 2, 1]) == [3, 1, 2]


def test_by_key():
    assert dedupe_by(["a", "B", "A", "b"], str.lower) == ["a", "B"]


def test_fast_enough():
    # 100,000 items, half of them repeats: linear work takes milliseconds.
    data = ["item-%d" % (i % 50000) for i in range(100000)]
    result = {}
    t = threading.Thread(target=lambda: result.update(out=dedupe(data)), daemon=True)
    t.start()
    t.join(5.0)
    assert not t.is_alive(), "dedupe() took more than 5 s for 100,000 items"
    assert len(result["out"]) == 50000
