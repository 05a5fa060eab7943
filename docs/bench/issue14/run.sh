#!/bin/bash
# Old (ab52927) and new binaries, alternating, twice each, on fresh SQLite files.
for round in 1 2; do
  for v in old new; do
    uptime > load-ops-$v-$round.txt
    /tmp/ssfkit-$v bench ops --daal-rows 0 --json > ops-$v-$round.json 2>/dev/null
    /tmp/ssfkit-$v bench travel --json > travel-$v-$round.json 2>/dev/null
    /tmp/ssfkit-$v bench temporal --json > temporal-$v-$round.json 2>/dev/null
  done
done
echo finished
