"""The Qt node canvas of the graph editor."""
