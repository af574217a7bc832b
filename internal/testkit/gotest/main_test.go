package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// stream is `go test -json` of four packages: one that fails (a failing
// subtest, a passing one, a skip for a missing part), one with no tests,
// one that passes with skips (two for one missing part, one for
// another, one for no missing part), and one whose test panics.
const stream = `{"Action":"start","Package":"example.com/m/a"}
{"Action":"run","Package":"example.com/m/a","Test":"TestSkip"}
{"Action":"output","Package":"example.com/m/a","Test":"TestSkip","Output":"=== RUN   TestSkip\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestSkip","Output":"    a_test.go:5: missing: node is not installed\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestSkip","Output":"--- SKIP: TestSkip (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/a","Test":"TestSkip","Elapsed":0}
{"Action":"output","Package":"example.com/m/a","Test":"TestFail","Output":"=== RUN   TestFail\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestFail","Output":"    a_test.go:6: before\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestFail/sub","Output":"=== RUN   TestFail/sub\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestFail/sub","Output":"    a_test.go:6: sub bad\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestFail/sub","Output":"--- FAIL: TestFail/sub (0.00s)\n"}
{"Action":"fail","Package":"example.com/m/a","Test":"TestFail/sub","Elapsed":0}
{"Action":"output","Package":"example.com/m/a","Test":"TestFail/subok","Output":"=== RUN   TestFail/subok\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestFail/subok","Output":"    a_test.go:7: a passing subtest's log\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestFail/subok","Output":"--- PASS: TestFail/subok (0.00s)\n"}
{"Action":"pass","Package":"example.com/m/a","Test":"TestFail/subok","Elapsed":0}
{"Action":"output","Package":"example.com/m/a","Test":"TestFail","Output":"printed\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestFail","Output":"--- FAIL: TestFail (0.00s)\n"}
{"Action":"fail","Package":"example.com/m/a","Test":"TestFail","Elapsed":0}
{"Action":"output","Package":"example.com/m/a","Output":"FAIL\n"}
{"Action":"output","Package":"example.com/m/a","Output":"from TestMain\n"}
{"Action":"output","Package":"example.com/m/a","Output":"FAIL\texample.com/m/a\t0.009s\n"}
{"Action":"fail","Package":"example.com/m/a","Elapsed":0.014}
{"Action":"output","Package":"example.com/m/d","Output":"?   \texample.com/m/d\t[no test files]\n"}
{"Action":"skip","Package":"example.com/m/d","Elapsed":0}
{"Action":"output","Package":"example.com/m/e","Test":"TestNeedsPG","Output":"=== RUN   TestNeedsPG\n"}
{"Action":"output","Package":"example.com/m/e","Test":"TestNeedsPG","Output":"    e_test.go:3: missing: PostgreSQL at x does not answer; set Y\n"}
{"Action":"output","Package":"example.com/m/e","Test":"TestNeedsPG","Output":"--- SKIP: TestNeedsPG (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/e","Test":"TestNeedsPG","Elapsed":0}
{"Action":"output","Package":"example.com/m/e","Test":"TestNeedsPG2/sub","Output":"=== RUN   TestNeedsPG2/sub\n"}
{"Action":"output","Package":"example.com/m/e","Test":"TestNeedsPG2/sub","Output":"    e_test.go:4: missing: PostgreSQL at x does not answer; set Y\n"}
{"Action":"output","Package":"example.com/m/e","Test":"TestNeedsPG2/sub","Output":"--- SKIP: TestNeedsPG2/sub (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/e","Test":"TestNeedsPG2/sub","Elapsed":0}
{"Action":"output","Package":"example.com/m/e","Test":"TestNeedsPG2","Output":"--- PASS: TestNeedsPG2 (0.00s)\n"}
{"Action":"pass","Package":"example.com/m/e","Test":"TestNeedsPG2","Elapsed":0}
{"Action":"output","Package":"example.com/m/e","Test":"TestOtherSkip","Output":"    e_test.go:5: not on this OS\n"}
{"Action":"output","Package":"example.com/m/e","Test":"TestOtherSkip","Output":"--- SKIP: TestOtherSkip (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/e","Test":"TestOtherSkip","Elapsed":0}
{"Action":"output","Package":"example.com/m/e","Test":"TestNode","Output":"    e_test.go:6: missing: node is not installed\n"}
{"Action":"output","Package":"example.com/m/e","Test":"TestNode","Output":"--- SKIP: TestNode (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/e","Test":"TestNode","Elapsed":0}
{"Action":"output","Package":"example.com/m/e","Output":"PASS\n"}
{"Action":"output","Package":"example.com/m/e","Output":"from TestMain\n"}
{"Action":"output","Package":"example.com/m/e","Output":"ok  \texample.com/m/e\t0.004s\n"}
{"Action":"pass","Package":"example.com/m/e","Elapsed":0.004}
{"Action":"output","Package":"example.com/m/f","Test":"TestPanics","Output":"=== RUN   TestPanics\n"}
{"Action":"output","Package":"example.com/m/f","Test":"TestPanics","Output":"    f_test.go:4: about to\n"}
{"Action":"output","Package":"example.com/m/f","Test":"TestPanics","Output":"panic: assignment to entry in nil map\n"}
{"Action":"output","Package":"example.com/m/f","Output":"FAIL\texample.com/m/f\t0.031s\n"}
{"Action":"fail","Package":"example.com/m/f","Elapsed":0.031}
`

// TestPrinter checks the output of a stream: go test's without -v, then
// one line naming the tests skipped for a missing part, grouped by why.
func TestPrinter(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	p := newPrinter(&out, &errOut, false)
	p.module = "example.com/m"
	p.read(strings.NewReader(stream))
	p.close()
	want := `    a_test.go:6: sub bad
--- FAIL: TestFail/sub (0.00s)
    a_test.go:6: before
printed
--- FAIL: TestFail (0.00s)
FAIL
from TestMain
FAIL	example.com/m/a	0.009s
?   	example.com/m/d	[no test files]
ok  	example.com/m/e	0.004s
    f_test.go:4: about to
panic: assignment to entry in nil map
FAIL	example.com/m/f	0.031s
FAIL
SKIP 4 tests for a missing part (-v shows each): node is not installed [a: TestSkip; e: TestNode] | PostgreSQL at x does not answer; set Y [e: TestNeedsPG, TestNeedsPG2/sub]
`
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	if errOut.Len() != 0 {
		t.Errorf("stderr: %s", errOut.String())
	}
}

// TestPrinterVerbose checks that with -v everything is printed, and the
// missing parts still named at the end.
func TestPrinterVerbose(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	p := newPrinter(&out, &out, true)
	p.read(strings.NewReader(stream))
	p.close()
	for _, want := range []string{"=== RUN   TestSkip\n", "    a_test.go:7: a passing subtest's log\n", "--- SKIP: TestOtherSkip (0.00s)\n",
		"FAIL\texample.com/m/f\t0.031s\nFAIL\nSKIP 4 tests for a missing part"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("verbose output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestPrinterCounts checks that past three tests of a package skipped
// for one reason, the line gives their number.
func TestPrinterCounts(t *testing.T) {
	t.Parallel()
	var in strings.Builder
	for _, name := range []string{"TestA", "TestB", "TestC", "TestD"} {
		in.WriteString(`{"Action":"output","Package":"example.com/m/pg","Test":"` + name + `","Output":"    pg_test.go:9: missing: no PostgreSQL\n"}` + "\n")
		in.WriteString(`{"Action":"skip","Package":"example.com/m/pg","Test":"` + name + `"}` + "\n")
	}
	in.WriteString(`{"Action":"output","Package":"example.com/m","Test":"TestE","Output":"    m_test.go:9: missing: no PostgreSQL\n"}` + "\n")
	in.WriteString(`{"Action":"skip","Package":"example.com/m","Test":"TestE"}` + "\n")
	var out bytes.Buffer
	p := newPrinter(&out, &out, false)
	p.module = "example.com/m"
	p.read(strings.NewReader(in.String()))
	p.close()
	if want := "SKIP 5 tests for a missing part (-v shows each): no PostgreSQL [pg: 4 tests; m: TestE]\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
}

// TestRun runs go test on a package of testdata whose tests skip, one
// through testkit.Unavailable, and checks the run ends with go test's
// line for it and the one naming the test skipped for a missing part.
func TestRun(t *testing.T) {
	t.Setenv("CI", "") // under CI, Unavailable fails instead
	var out, errOut bytes.Buffer
	if code := run([]string{"-count=1", "./testdata/missing"}, &out, &errOut); code != 0 {
		t.Fatalf("exit status %d\n%s%s", code, out.String(), errOut.String())
	}
	want := regexp.MustCompile(`^ok  \tgithub.com/airlockhq/airlock/internal/testkit/gotest/testdata/missing\t\S+\n` +
		`SKIP 1 test for a missing part \(-v shows each\): the part is not installed \(install it, or set PART\) \[internal/testkit/gotest/testdata/missing: TestNeedsAPart\]\n$`)
	if !want.MatchString(out.String()) {
		t.Errorf("output:\n%s\nwant it to match %s\nstderr: %s", out.String(), want, errOut.String())
	}
}
