from convert import celsius_to_fahrenheit, fahrenheit_to_celsius, meter_to_yard_0


def test_boiling():
    assert celsius_to_fahrenheit(100) == 212


def test_freezing_round_trip():
    assert fahrenheit_to_celsius(celsius_to_fahrenheit(0)) == 0


def test_table():
    assert meter_to_yard_0(1) > 0
