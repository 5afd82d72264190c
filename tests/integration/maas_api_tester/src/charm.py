#!/usr/bin/env python3
"""Test provider of the maas_api interface: publishes its model as the infra namespace."""

import ops

from charms.aitenant_k8s.v0.maas_api import MaasApiAppData, MaasApiProvider


class MaasApiTesterCharm(ops.CharmBase):
    def __init__(self, framework: ops.Framework):
        super().__init__(framework)
        self.maas_api = MaasApiProvider(self)
        for event in (
            self.on.config_changed,
            self.on.leader_elected,
            self.on["maas-api"].relation_joined,
        ):
            framework.observe(event, self._publish)

    def _publish(self, _: ops.EventBase) -> None:
        self.maas_api.publish(
            MaasApiAppData(
                image=str(self.config["image"]),
                infra_namespace=self.model.name,
                service_name="maas-api",
                service_port=8443,
                db_secret=str(self.config["db-secret"]),
            )
        )
        self.unit.status = ops.ActiveStatus()


if __name__ == "__main__":  # pragma: nocover
    ops.main(MaasApiTesterCharm)
