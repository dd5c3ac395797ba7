import datetime
import unittest

import pytest

DAYS = [datetime.date(2024, 1, 1) + datetime.timedelta(days=7 * i) for i in range(52)]


@pytest.mark.parametrize("day", DAYS, ids=str)
def test_isoformat_roundtrip(day):
    assert datetime.date.fromisoformat(day.isoformat()) == day


class TestWeekdays(unittest.TestCase):
    def test_monday(self):
        self.assertEqual(datetime.date(2024, 1, 1).weekday(), 0)

    def test_sunday(self):
        self.assertEqual(datetime.date(2024, 1, 7).weekday(), 6)

    @unittest.skip("needs the tz database")
    def test_zone_names(self):
        raise AssertionError("never runs")

    @unittest.skip("slow on CI")
    def test_every_year(self):
        raise AssertionError("never runs")

    def test_skips_itself(self):
        self.skipTest("not on this platform")

    @unittest.expectedFailure
    def test_leap_second(self):
        datetime.time(23, 59, 60)


@unittest.skip("whole class parked")
class TestParked(unittest.TestCase):
    def test_one(self):
        raise AssertionError("never runs")

    def test_two(self):
        raise AssertionError("never runs")


class TestArithmetic(unittest.TestCase):
    def test_add(self):
        self.assertEqual(DAYS[0] + datetime.timedelta(days=1), datetime.date(2024, 1, 2))

    def test_subtract(self):
        self.assertEqual((DAYS[1] - DAYS[0]).days, 7)
