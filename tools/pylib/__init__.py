"""R2SP's Python tools library (the scripts in tools/ import it as `pylib`, with tools/ on their
path). Subpackages by job:

  job        a job's options, processes, local run, supervision, --resume, keys, errors
  cluster    cluster files, the release bundle, each role's command, where results are left
  deploy     the remote backends (ssh, slurm, k8s, ec2) over one shared driver; safe archives
  analysis   run files, summary.json, mode comparisons and their plots, configurations, CPU use
  emulation  the emulated multi-host cluster (netcluster) and the soak runs

Functions raise (job.errors.JobError and module-specific errors), never exit; signal handlers
belong to the entry scripts."""
