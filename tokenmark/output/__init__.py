"""Writers of the results folder: records, results.json, MLPerf log files."""
