package broker

import (
	"time"

	"github.com/quirelog/quire/config"
)

// The node's configuration is package config's: broker.Config is a
// config.Config, with its defaults and documentation here under the names
// the node's users know.

// Config is a node's configuration (config.Config).
type Config = config.Config

// SecurityConfig is the security section of Config.
type SecurityConfig = config.SecurityConfig

// DefaultConfig is config.DefaultConfig: Kafka's defaults where Kafka
// has the key.
func DefaultConfig() Config { return config.DefaultConfig() }

// DevConfig is config.DevConfig: a single node that is both controller
// and broker, with its data in dataDir.
func DevConfig(dataDir string) Config { return config.DevConfig(dataDir) }

// ConfigHelp is the key list shown by `quire server --help`.
func ConfigHelp() string { return config.ConfigHelp() }

// ConfigMarkdown renders docs/configuration.md.
func ConfigMarkdown() string { return config.ConfigMarkdown() }

// EnvName is the environment variable of a key.
func EnvName(key string) string { return config.EnvName(key) }

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
