"""The direct AllReduce (derived): shards sized by an exact LP, every node to every node (`build`);
`record` its table row."""
