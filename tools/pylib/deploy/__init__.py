"""Running a cluster-file job remotely: one driver (driver.py) owns the run skeleton and each
backend (ssh, slurm, k8s, ec2) supplies its hooks; archives are unpacked only through
archive.safe_extract."""
