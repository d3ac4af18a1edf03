"""A subscriber ``ECHOMQ["EVENTS"]["QUEUES"]`` names: keeps the events this process saw."""

seen: list[tuple[str, dict]] = []


def remember(event_type, event_data) -> None:
    seen.append((str(event_type), event_data))
