package main

import (
	"strconv"
	"unicode/utf8"

	"github.com/quirelog/quire/internal/errcode"
)

// echoValue is how an error line names a record by its value: a short
// value as it is, a long one (or one that is not text) quoted and cut the
// way the brokers cut values in their messages, with its size, so that a
// 5 MB record refused as too large is not written back whole to the
// terminal before the reason.
func echoValue(v []byte) string {
	if len(v) <= errcode.MaxQuoted && utf8.Valid(v) {
		return string(v)
	}
	return errcode.Message(strconv.Quote(string(v)))
}
