"""Table and plot specs: what they hold, how they are read, where they are found."""
