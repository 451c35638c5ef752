"""What `hvdbench train` runs in every Horovod process: the typed run configuration (`config`),
the worker (`worker`: config -> trainer -> loop -> events -> result) and its parts."""
