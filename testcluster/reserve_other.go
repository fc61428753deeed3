//go:build !unix

package testcluster

// reservation is nothing where sockets are not Unix's: a restart binds
// the address again as it finds it.
type reservation struct{}

func reserve(string) (*reservation, error) { return &reservation{}, nil }

func (*reservation) release() {}
