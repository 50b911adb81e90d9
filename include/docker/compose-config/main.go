// compose-config loads a compose file the way `docker compose config` does (compose-go: variable
// interpolation, merge keys, schema validation, normalization) and prints the resolved project
// as YAML. tests/deploy/test_compose.py runs it where no Docker engine is installed.
//
// Usage: compose-config COMPOSE_FILE ENV_FILE WORKING_DIR [PROFILE...]
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: compose-config COMPOSE_FILE ENV_FILE WORKING_DIR [PROFILE...]")
		os.Exit(2)
	}
	// Only ENV_FILE feeds interpolation: not the caller's environment, not a .env lying around.
	options, err := cli.NewProjectOptions(
		[]string{os.Args[1]},
		cli.WithWorkingDirectory(os.Args[3]),
		cli.WithEnvFiles(os.Args[2]),
		cli.WithDotEnv,
		cli.WithProfiles(os.Args[4:]),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	project, err := options.LoadProject(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, err := project.MarshalYAML()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}
