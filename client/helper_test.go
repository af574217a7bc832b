package client_test

// helperEnv, when set, makes the test binary act as a gate helper process
// (see crash_test.go) instead of running tests.
const helperEnv = "AIRLOCK_GATE_HELPER"

func gateHelper() int { return 3 }
