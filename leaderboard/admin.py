"""Django admin for the leaderboard app."""
