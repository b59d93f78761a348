import unittest

from roomkit_plugin.timers import Timers


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class TimerTests(unittest.TestCase):
    def setUp(self):
        self.clock = FakeClock()
        self.timers = Timers(self.clock)
        self.fired = []

    def run_due(self):
        return self.timers.run_due(lambda what, fn: fn())

    def test_one_shot_fires_once_when_due(self):
        self.timers.add(50, 0, lambda: self.fired.append("a"))
        self.assertAlmostEqual(self.timers.timeout(), 0.05)
        self.assertEqual(self.run_due(), 0)
        self.clock.now += 0.05
        self.assertEqual(self.timers.timeout(), 0)
        self.assertEqual(self.run_due(), 1)
        self.clock.now += 1
        self.assertEqual(self.run_due(), 0)
        self.assertEqual(self.fired, ["a"])
        self.assertIsNone(self.timers.timeout())

    def test_repeating_timer_keeps_its_period_and_skips_missed_turns(self):
        self.timers.add(10, 10, lambda: self.fired.append(self.clock.now))
        self.clock.now += 0.010
        self.run_due()
        self.clock.now += 0.010
        self.run_due()
        self.clock.now += 1.0  # far behind: one run, not a hundred
        self.assertEqual(self.run_due(), 1)
        self.assertEqual(len(self.fired), 3)
        self.assertAlmostEqual(self.timers.timeout(), 0.010)

    def test_cancel_and_clear(self):
        first = self.timers.add(0, 0, lambda: self.fired.append(1))
        self.timers.add(0, 5, lambda: self.fired.append(2))
        self.timers.cancel(first)
        self.timers.cancel(999)
        self.run_due()
        self.assertEqual(self.fired, [2])
        self.timers.clear()
        self.clock.now += 1
        self.assertEqual(self.run_due(), 0)
        self.assertEqual(len(self.timers), 0)

    def test_bad_arguments(self):
        with self.assertRaises(TypeError):
            self.timers.add(1, 0, "not callable")
        with self.assertRaises(ValueError):
            self.timers.add(-1, 0, lambda: None)


if __name__ == "__main__":
    unittest.main()
