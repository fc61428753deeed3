// Package testparallel sets how many parallel tests of a package run at
// once.
package testparallel

import (
	"flag"
	"runtime"
	"strconv"
)

// Raise, called from a package's TestMain before m.Run, lets
// twice as many parallel tests run at once as there are CPUs (go test's
// default is as many): cluster tests spend most of their time waiting on
// timers and the network, not computing. An explicit -test.parallel (go
// test -parallel) is left as given.
func Raise() {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given && flag.Lookup("test.parallel") != nil {
		_ = flag.Set("test.parallel", strconv.Itoa(2*runtime.GOMAXPROCS(0)))
	}
}
