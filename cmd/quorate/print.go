package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/quorate/quorate/api"
)

func configAnswer(cc api.ConfigChange, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return cc, nil
}

func printConfigChange(w io.Writer, v any) {
	cc := v.(api.ConfigChange)
	fmt.Fprintf(w, "config version %d applied in %d group(s)", cc.Version, len(cc.Applied))
	if len(cc.Lagging) > 0 {
		fmt.Fprintf(w, "; not yet in %s", strings.Join(cc.Lagging, ","))
	}
	fmt.Fprintln(w)
}
