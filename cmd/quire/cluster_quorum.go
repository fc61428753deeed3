package main

import (
	"errors"

	"github.com/quirelog/quire/client"
)

// errNoController is cluster info's answer when the node it asked knows
// of no active controller: the metadata quorum has no leader (a majority
// of the controllers is down or cut off), so the brokers listed are the
// node's last applied view, and whether each is fenced cannot be told.
var errNoController = errors.New("no active controller: the metadata quorum has no leader (a majority of the controllers may be down or cut off), so the brokers above are the last view of the node asked and whether each is fenced is unknown")

func noControllerErr(unconfirmed bool) error {
	if unconfirmed {
		return errNoController
	}
	return nil
}

// clusterInfoJSON is cluster info's JSON: the client's description, with
// fenced null (unknown) while there is no active controller.
type clusterInfoJSON struct {
	ClusterID    string           `json:"cluster_id"`
	ControllerID int32            `json:"controller_id"`
	Brokers      []brokerInfoJSON `json:"brokers"`
}

type brokerInfoJSON struct {
	ID            int32  `json:"id"`
	Address       string `json:"address"`
	Rack          string `json:"rack,omitempty"`
	Fenced        *bool  `json:"fenced"`
	Controller    bool   `json:"controller"`
	Partitions    int32  `json:"partitions"`
	MaxPartitions int32  `json:"max_partitions"`
	// Cordoned: no new replica is placed on it (quire broker cordon).
	Cordoned bool `json:"cordoned"`
}

func clusterJSON(d *client.ClusterDescription) clusterInfoJSON {
	out := clusterInfoJSON{ClusterID: d.ClusterID, ControllerID: d.ControllerID}
	for _, b := range d.Brokers {
		j := brokerInfoJSON{ID: b.ID, Address: b.Address, Rack: b.Rack, Controller: b.Controller,
			Partitions: b.Partitions, MaxPartitions: b.MaxPartitions, Cordoned: b.Cordoned}
		if d.ControllerID >= 0 {
			fenced := b.Fenced
			j.Fenced = &fenced
		}
		out.Brokers = append(out.Brokers, j)
	}
	return out
}
