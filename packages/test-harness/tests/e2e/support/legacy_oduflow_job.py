"""
oduflow_job as an older client carries it: a module from before protocol 1.

An e2e fixture (packages/test-harness/tests/e2e): the topology installs and
serves this file in place of the reviewed module to show that the master
refuses to publish to such a client. Its ``capabilities`` answers protocol 0,
and its ``run`` applies the role directly, without any receipt, so that a
publication that slipped through would show up as a marker line.
"""

__version__ = "0.9.0"

PROFILE_ROLES = {
    "configure": "roles.client_stack",
    "production": "roles.client_production",
    "volume_resize": "roles.client_storage_resize",
    "credentials": "roles.client_credentials",
}


def capabilities():
    import salt.version

    return {"protocol": 0, "module_version": __version__, "salt_version": salt.version.__version__}


def run(request_id, profile, state_data_json="", **kwargs):
    return __salt__["state.sls"](PROFILE_ROLES[profile])
