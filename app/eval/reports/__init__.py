"""What an eval run leaves for a person: `chart.png` (matplotlib), `misses.png` (the missed items' crops) and
`report.html`, one page that holds the tables, the pictures and what was measured."""
