// Package config is a node's configuration: the Config struct with
// Kafka's names for Kafka's knobs, its defaults (DefaultConfig,
// DevConfig), its sources (a properties file, QUIRE_* environment
// variables, Set), and Validate, which checks every key with its own
// parser and the keys against each other (config.go, configkeys.go; an
// unknown key gets the nearest known one as a hint: config_suggest.go).
//
// The sections a node needs in more than one place live here too: the
// topic keys and each topic's resolved configuration over the node's
// defaults (topicconfig.go), the listeners parsed into a plan
// (listener_config.go), the security keys (security_config.go) and the
// Kafka listeners' protocols and SASL mechanisms (kafka_config.go).
// Package broker reads a Config and builds the node from it; this
// package imports nothing of the node's wiring.
package config
